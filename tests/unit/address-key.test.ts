import { addressKey } from '../../gateway/connections.js';

// The key a client address's open connections count under (connections.ts): an IPv6 client
// owns a whole /64, so every address of it counts as one.

describe('addressKey', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:10.0.0.7', '10.0.0.7'],
    ['::1', '0:0:0:0::/64'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:0:0:0:9', '2001:db8:1:2::/64'],
    ['2001:db8::5', '2001:db8:0:0::/64'],
  ])('%s counts as %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
  });
});

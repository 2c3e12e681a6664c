import { addressKey } from '../../gateway/auth/address.js';

// The key a client address counts under in every limit of an address (auth/address.ts): an
// IPv6 client owns a whole /56 (or /64) network, so every address of it counts as one.

describe('addressKey', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:10.0.0.7', '10.0.0.7'],
    ['::1', '::/56'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1::/56'],
    ['2001:db8:1:2::1', '2001:db8:1::/56'],
    ['2001:db8:1:2ff::1', '2001:db8:1:200::/56'],
    ['2001:0db8:0001:0002:0:0:0:9', '2001:db8:1::/56'],
    ['2001:db8::5', '2001:db8::/56'],
    [undefined, 'unknown'],
  ])('%s counts as %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
  });
});

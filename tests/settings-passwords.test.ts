import { jest } from '@jest/globals';

// An unknown email must cost a sign-in the same work as a wrong password (one argon2
// verification), so that timing does not tell which emails have an account. Counting the
// verifications proves it without a timed test, which would flake on a loaded machine.

const verify = jest.fn(async (_hash: string, _password: string) => false);
const hash = jest.fn(async (password: string) => `$argon2id$dummy$${password.length}`);
jest.unstable_mockModule('@node-rs/argon2', () => ({ hash, verify }));
const { checkPassword } = await import('../gateway/admin/passwords.js');

describe('checkPassword', () => {
  beforeEach(() => verify.mockClear());

  it('verifies an unknown email against a dummy hash: the same work as a wrong password', async () => {
    expect(await checkPassword(null, 'a guess')).toBe(false);
    expect(verify).toHaveBeenCalledTimes(1);
    expect(verify.mock.calls[0]?.[0]).toMatch(/^\$argon2id\$/);

    expect(await checkPassword('$argon2id$stored', 'a guess')).toBe(false);
    expect(verify).toHaveBeenCalledTimes(2);
  });

  it('accepts only a matching stored hash, and refuses an over-long password without hashing it', async () => {
    verify.mockResolvedValueOnce(true);
    expect(await checkPassword('$argon2id$stored', 'right one')).toBe(true);
    expect(await checkPassword('$argon2id$stored', 'x'.repeat(1025))).toBe(false);
    expect(verify).toHaveBeenCalledTimes(1);
  });

  it('treats a stored value that is not an argon2 hash as matching nothing', async () => {
    verify.mockRejectedValueOnce(new Error('invalid hash'));
    expect(await checkPassword('not-a-hash', 'anything')).toBe(false);
  });
});

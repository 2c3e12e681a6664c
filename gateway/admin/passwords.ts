import { randomBytes } from 'node:crypto';

// Member passwords: argon2id with the package's defaults (19 MiB, 2 passes, 1 lane: OWASP's
// recommended minimum), in the PHC string format, in user_credentials.password_hash.

export const MIN_PASSWORD_LENGTH = 12;
const MAX_PASSWORD_LENGTH = 1024;

// The argon2 package (a native library, megabytes resident) is loaded when a password is first
// hashed or checked: most server processes never do either.
const argon2 = () => import('@node-rs/argon2');

export const hashPassword = async (password: string): Promise<string> => (await argon2()).hash(password);

// An unknown email is checked against this hash, so it costs the same time as a wrong password
// and the answer's timing does not tell which emails have an account.
let dummyHash: Promise<string> | undefined;

/** True only for a stored hash that matches; false for a missing hash, after the same work. */
export async function checkPassword(stored: string | null | undefined, password: string): Promise<boolean> {
  if (password.length > MAX_PASSWORD_LENGTH) return false;
  const { hash, verify } = await argon2();
  if (!stored) {
    dummyHash ??= hash(randomBytes(16).toString('hex'));
    await verify(await dummyHash, password).catch(() => false);
    return false;
  }
  try {
    return await verify(stored, password);
  } catch {
    return false; // a hash that is not a PHC argon2 string: no password can match it
  }
}

/** A one-time password for a new member: 24 base64url characters (144 bits). */
export const newPassword = (): string => randomBytes(18).toString('base64url');

/** Why a chosen password is refused, or undefined when it is acceptable. */
export function passwordProblem(password: string): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH) return `a password has at least ${MIN_PASSWORD_LENGTH} characters`;
  if (password.length > MAX_PASSWORD_LENGTH) return `a password has at most ${MAX_PASSWORD_LENGTH} characters`;
  return undefined;
}

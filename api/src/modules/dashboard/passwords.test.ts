import { describe, expect, it } from '@jest/globals';
import { hashPassword, passwordProblem, verifyPassword } from './passwords.ts';

// Small scrypt parameters keep the unit test fast; the stored parameters travel with the hash.
const FAST = { N: 2 ** 10, r: 8, p: 1 };

describe('dashboard passwords', () => {
  it('hashes with scrypt and a fresh salt, and verifies', async () => {
    const a = await hashPassword('correct horse battery staple', FAST);
    const b = await hashPassword('correct horse battery staple', FAST);
    expect(a).toMatch(/^scrypt\$1024\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(a).not.toBe(b);
    await expect(verifyPassword('correct horse battery staple', a)).resolves.toBe(true);
    await expect(verifyPassword('correct horse battery stapler', a)).resolves.toBe(false);
    await expect(verifyPassword('x', 'not-a-hash')).resolves.toBe(false);
  });
  it('refuses short and guessable passwords and accepts a passphrase', () => {
    expect(passwordProblem('short', [])).toMatch(/at least 10/);
    expect(passwordProblem('password123', [])).toMatch(/too easy to guess/);
    expect(passwordProblem('qwertyuiop', [])).toMatch(/too easy to guess/);
    expect(passwordProblem('alice.smith@example.com', ['alice.smith@example.com'])).toMatch(/too easy/);
    expect(passwordProblem('velvet Anchor tiptoe 93 marmalade', [])).toBeUndefined();
  });
});

// Dashboard passwords: scrypt from node:crypto (parameters in docs/adr/0050) and a strength check
// with zxcvbn-ts (English and common dictionaries, the account's email as a user input).
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ZxcvbnFactory } from '@zxcvbn-ts/core';
import * as common from '@zxcvbn-ts/language-common';
import * as en from '@zxcvbn-ts/language-en';

/** N=2^16, r=8, p=1: 64 MiB and about 0.3-0.6 s per hash on this project's 2-core machines (docs/adr/0050). */
export const SCRYPT_PARAMS = { N: 2 ** 16, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_BYTES = 16;
export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 256;
/** zxcvbn score 0-4; 3 is "safely unguessable: moderate protection from offline slow-hash scenario". */
export const MIN_PASSWORD_SCORE = 3;

const scrypt = (password: string, salt: Buffer, keylen: number, options: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) =>
    scryptCb(password, salt, keylen, options, (err, key) => (err ? reject(err) : resolve(key))),
  );

const maxmem = (p: { N: number; r: number }) => 128 * p.N * p.r * 2;

export async function hashPassword(
  password: string,
  params: { N: number; r: number; p: number } = SCRYPT_PARAMS,
): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await scrypt(password, salt, KEY_LENGTH, { ...params, maxmem: maxmem(params) });
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const salt = Buffer.from(parts[4]!, 'base64');
  const expected = Buffer.from(parts[5]!, 'base64');
  const key = await scrypt(password, salt, expected.length, { N, r, p, maxmem: maxmem({ N, r }) });
  return timingSafeEqual(key, expected);
}

/** A hash of a random password: compared against when the email is unknown, so timing tells nothing. */
let decoy: Promise<string> | undefined;
export const decoyHash = (): Promise<string> => (decoy ??= hashPassword(randomBytes(16).toString('hex')));

const zxcvbn = new ZxcvbnFactory({
  dictionary: { ...common.dictionary, ...en.dictionary },
  graphs: common.adjacencyGraphs,
  translations: en.translations,
});

/** Why a new password is refused, or undefined when it is acceptable. */
export function passwordProblem(password: string, userInputs: string[]): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH)
    return `Password must be at least ${MIN_PASSWORD_LENGTH} characters long.`;
  if (password.length > MAX_PASSWORD_LENGTH)
    return `Password must be at most ${MAX_PASSWORD_LENGTH} characters long.`;
  const result = zxcvbn.check(password, userInputs);
  if (result.score < MIN_PASSWORD_SCORE) {
    const hint = result.feedback.warning ?? result.feedback.suggestions[0];
    return `This password is too easy to guess.${hint ? ` ${hint}` : ''} Try a longer passphrase of several unrelated words.`;
  }
  return undefined;
}

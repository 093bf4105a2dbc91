// Dashboard passwords: scrypt from node:crypto (parameters in docs/adr/0050) and a strength check
// with zxcvbn-ts (English and common dictionaries, the account's email as a user input).
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ZxcvbnFactory } from '@zxcvbn-ts/core';
import * as common from '@zxcvbn-ts/language-common';
import * as en from '@zxcvbn-ts/language-en';
import { AppError } from '#common/errors.ts';

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

/**
 * scrypt runs in libuv's thread pool (4 threads), which DNS lookups and file reads share: at most
 * this many hashes run at once, the rest wait in a queue of at most SCRYPT_QUEUE, and past that a
 * request is refused with 503 and Retry-After (docs/security.md, "Throttles"). Without the bound,
 * ~400 concurrent sign-ins held every thread for seconds and the database connections starved.
 */
export const SCRYPT_CONCURRENCY = 2;
export const SCRYPT_QUEUE = 32;
/** What the 503 asks a client to wait: about a queue's worth of hashes. */
export const SCRYPT_RETRY_AFTER_SECONDS = 5;

let running = 0;
const waiting: (() => void)[] = [];

/** Runs `work` when a slot is free; throws SERVICE_UNAVAILABLE (503) when the queue is full. */
async function bounded<T>(work: () => Promise<T>): Promise<T> {
  if (running < SCRYPT_CONCURRENCY) running++;
  else if (waiting.length >= SCRYPT_QUEUE)
    throw new AppError('SERVICE_UNAVAILABLE', { retryAfter: SCRYPT_RETRY_AFTER_SECONDS });
  // The slot is handed over by the finishing hash (running stays the same).
  else await new Promise<void>((resolve) => waiting.push(resolve));
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

/** A new password's hash; may throw SERVICE_UNAVAILABLE (the scrypt queue is full). */
export function hashPassword(
  password: string,
  params: { N: number; r: number; p: number } = SCRYPT_PARAMS,
): Promise<string> {
  return bounded(() => hashUnbounded(password, params));
}

async function hashUnbounded(password: string, params: { N: number; r: number; p: number }): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await scrypt(password, salt, KEY_LENGTH, { ...params, maxmem: maxmem(params) });
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Whether the password matches; may throw SERVICE_UNAVAILABLE (the scrypt queue is full). */
export function verifyPassword(password: string, stored: string): Promise<boolean> {
  return bounded(() => verifyUnbounded(password, stored));
}

async function verifyUnbounded(password: string, stored: string): Promise<boolean> {
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
export const decoyHash = (): Promise<string> =>
  (decoy ??= hashUnbounded(randomBytes(16).toString('hex'), SCRYPT_PARAMS));

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

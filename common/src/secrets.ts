// Key and credential material shared by the API, the admin API and the ApiKey controller.
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  randomBytes,
  randomInt,
  timingSafeEqual,
} from 'node:crypto';

export const API_KEY_PREFIX = 'svc_live_';
export const API_KEY_PATTERN = /^svc_live_[0-9a-f]{48}$/;
/** Characters of the key shown in listings: the prefix and 6 hex characters. */
const DISPLAY_PREFIX_LENGTH = API_KEY_PREFIX.length + 6;

export interface IssuedKey {
  key: string;
  hash: Buffer;
  prefix: string;
  last4: string;
}

/** A new API key: `svc_live_` + 48 lowercase hex characters (24 bytes from the CSPRNG). */
export function issueApiKey(): IssuedKey {
  return describeApiKey(API_KEY_PREFIX + randomBytes(24).toString('hex'));
}

/** Hash and display parts of an existing key (the ApiKey controller re-reads keys from Secrets). */
export function describeApiKey(key: string): IssuedKey {
  return { key, hash: hashApiKey(key), prefix: key.slice(0, DISPLAY_PREFIX_LENGTH), last4: key.slice(-4) };
}

/** sha256 of the key: 192 random bits need no slow hash (docs/adr). */
export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Compares two strings in time independent of where they differ (lengths are hashed first). */
export function constantTimeEqualStrings(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}

const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function randomString(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

/** Proxy usernames are [a-z0-9] and passwords [A-Za-z0-9]: the grammar separators never occur. */
export const newProxyUsername = () => 'u' + randomString(LOWER_ALNUM, 11);
export const newProxyPassword = () => randomString(ALNUM, 20);
/** A sticky-session id for generated proxy strings. */
export const newSessionId = () => randomString(LOWER_ALNUM, 10);

// AES-256-GCM for secrets that must be readable again (proxy passwords). Layout:
// version byte (1) | 12-byte nonce | ciphertext | 16-byte tag.
const SEALED_VERSION = 1;

export function seal(key: Buffer, plaintext: string): Buffer {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([SEALED_VERSION]), nonce, body, cipher.getAuthTag()]);
}

export function unseal(key: Buffer, sealed: Buffer): string {
  if (sealed.length < 29 || sealed[0] !== SEALED_VERSION)
    throw new Error('sealed secret has an unknown format');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 13));
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  return Buffer.concat([decipher.update(sealed.subarray(13, sealed.length - 16)), decipher.final()]).toString(
    'utf8',
  );
}

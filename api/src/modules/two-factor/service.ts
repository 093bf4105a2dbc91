// Two-factor sign-in (docs/security.md "Two-factor sign-in and sessions", docs/adr/0077): TOTP
// codes (RFC 6238: SHA-1, 6 digits, 30 s, one step either side) from otpauth, the secret's QR
// code from qrcode, and ten single-use recovery codes. The secret is sealed at rest like the
// proxy passwords; the recovery codes are kept as HMAC-SHA256 under a key derived from the same
// credentials key. A code is accepted only for a time step later than the last accepted one, so
// a code seen once cannot be replayed within its window.
import { queueSecurityNotice } from '#common/accounts/security-notices.ts';
import { createHmac, hkdfSync } from 'node:crypto';
import * as OTPAuth from 'otpauth';
import QRCode from 'qrcode';
import { withTransaction, type Pool, type PoolClient } from '#common/db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '#common/audit/record.ts';
import { randomString, seal, unseal } from '#common/secrets.ts';
import * as repo from './repo.ts';

export const TOTP_PERIOD_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** Codes of this many steps before or after now are accepted (clock drift, slow typing). */
const TOTP_WINDOW = 1;
export const RECOVERY_CODE_COUNT = 10;
const ISSUER = 'proxyfleet';
/** 32 letters and digits without 0/o and 1/l: 5 bits each, 12 of them (60 bits) per code. */
const RECOVERY_ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789';
const RECOVERY_LENGTH = 12;

/** What a customer typed into "Code": a TOTP code, a recovery code, or neither. */
export type SecondFactorKind = 'totp' | 'recovery_code';

export const newSecret = (): string => new OTPAuth.Secret({ size: 20 }).base32;

const totp = (secret: string, label: string) =>
  new OTPAuth.TOTP({
    issuer: ISSUER,
    label,
    algorithm: 'SHA1',
    digits: TOTP_DIGITS,
    period: TOTP_PERIOD_SECONDS,
    secret: OTPAuth.Secret.fromBase32(secret),
  });

/** The otpauth:// URI an authenticator app reads from the QR code. */
export const otpauthUri = (secret: string, email: string): string => totp(secret, email).toString();

/**
 * The URI as an inline SVG (paths with presentation attributes only: no script, no style, so the
 * dashboard's CSP holds), labelled for screen readers.
 */
export async function qrSvg(uri: string, label: string): Promise<string> {
  const svg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
  const escaped = label.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return svg.replace('<svg ', `<svg role="img" aria-label="${escaped}" width="200" height="200" `);
}

/** The RFC 6238 time step of `code` if it is a code of `secret` within the window, else undefined. */
export function codeStep(secret: string, code: string, now = Date.now()): number | undefined {
  const t = totp(secret, '');
  const delta = t.validate({ token: code, timestamp: now, window: TOTP_WINDOW });
  return delta === null ? undefined : t.counter({ timestamp: now }) + delta;
}

export const recoveryKeyFrom = (credentialsKey: Buffer): Buffer =>
  Buffer.from(hkdfSync('sha256', credentialsKey, Buffer.alloc(0), 'proxyfleet recovery codes v1', 32));

/** Ten new codes as shown: `abcd-efgh-jkmn`. */
export const newRecoveryCodes = (): string[] =>
  Array.from({ length: RECOVERY_CODE_COUNT }, () =>
    randomString(RECOVERY_ALPHABET, RECOVERY_LENGTH).replace(/(.{4})(?=.)/g, '$1-'),
  );

/** A typed code in one form: spaces and dashes dropped, lower case. */
const normalise = (typed: string) => typed.replace(/[\s-]/g, '').toLowerCase();

/** Which kind of code was typed, judged by its shape. */
export function codeKind(typed: string): SecondFactorKind | undefined {
  const code = normalise(typed);
  if (new RegExp(`^\\d{${TOTP_DIGITS}}$`).test(code)) return 'totp';
  if (code.length === RECOVERY_LENGTH && [...code].every((c) => RECOVERY_ALPHABET.includes(c)))
    return 'recovery_code';
  return undefined;
}

export const hashRecoveryCode = (recoveryKey: Buffer, typed: string): Buffer =>
  createHmac('sha256', recoveryKey).update(normalise(typed)).digest();

/** Two-factor sign-in of one account, with the credentials key its secrets are sealed under. */
export class TwoFactor {
  private readonly pool: Pool;
  private readonly credentialsKey: Buffer;
  private derivedRecoveryKey: Buffer | undefined;
  constructor(pool: Pool, credentialsKey: Buffer) {
    this.pool = pool;
    this.credentialsKey = credentialsKey;
  }

  private get recoveryKey(): Buffer {
    return (this.derivedRecoveryKey ??= recoveryKeyFrom(this.credentialsKey));
  }

  state(accountId: string): Promise<repo.TwoFactorState> {
    return repo.readState(this.pool, accountId);
  }

  /**
   * Starts turning two-factor sign-in on: a new secret, kept (sealed) until the customer confirms
   * a first code. Undefined when it is already on.
   */
  async start(accountId: string): Promise<string | undefined> {
    const secret = newSecret();
    const started = await repo.putPendingSecret(this.pool, accountId, seal(this.credentialsKey, secret));
    return started ? secret : undefined;
  }

  /** The secret's QR code (its otpauth URI) as inline SVG. */
  qr(secret: string, email: string): Promise<string> {
    return qrSvg(otpauthUri(secret, email), 'QR image of the two-factor secret, for an authenticator app');
  }

  /** The secret being confirmed, if turning on has started and is not finished. */
  async pendingSecret(accountId: string): Promise<string | undefined> {
    const sealed = await repo.readPendingSecret(this.pool, accountId);
    return sealed && unseal(this.credentialsKey, sealed);
  }

  /**
   * Finishes turning on with a first code: returns the recovery codes (to be shown once), or
   * undefined when the code is not right or nothing was started.
   */
  async confirm(accountId: string, typed: string, actor: AuditActor): Promise<string[] | undefined> {
    return withTransaction(this.pool, async (client) => {
      // The account row first, then the secret's (docs/adr/0079 "Lock order").
      await lockAccountForAudit(client, accountId);
      const row = await repo.lockSecret(client, accountId);
      if (!row || row.enabledAt) return undefined;
      const step = codeStep(unseal(this.credentialsKey, row.secretEnc), normalise(typed));
      if (step === undefined) return undefined;
      const codes = newRecoveryCodes();
      await repo.enable(
        client,
        accountId,
        step,
        codes.map((c) => hashRecoveryCode(this.recoveryKey, c)),
      );
      await recordAudit(client, {
        accountId,
        actor,
        action: 'two_factor.enabled',
        details: { recoveryCodesIssued: codes.length },
      });
      // Every two-factor change is emailed to the owner, in the change's transaction.
      await queueSecurityNotice(client, accountId, { event: 'two_factor_enabled', ip: actor.ip ?? null });
      return codes;
    });
  }

  /**
   * Checks a code of an enabled account inside the caller's transaction and uses it up: a TOTP
   * code's step becomes the last used one, a recovery code is spent. The kind used, or undefined.
   */
  async use(client: PoolClient, accountId: string, typed: string): Promise<SecondFactorKind | undefined> {
    const row = await repo.lockSecret(client, accountId);
    if (!row?.enabledAt) return undefined;
    const kind = codeKind(typed);
    if (kind === 'totp') {
      const step = codeStep(unseal(this.credentialsKey, row.secretEnc), normalise(typed));
      if (step === undefined || (row.lastStep !== null && step <= row.lastStep)) return undefined;
      await repo.setLastStep(client, accountId, step);
      return kind;
    }
    if (kind === 'recovery_code') {
      const spent = await repo.spendRecoveryCode(
        client,
        accountId,
        hashRecoveryCode(this.recoveryKey, typed),
      );
      return spent ? kind : undefined;
    }
    return undefined;
  }

  /** A sign-in's second step: checks and uses up a code (as `use`), in a transaction of its own. */
  check(accountId: string, typed: string): Promise<SecondFactorKind | undefined> {
    return withTransaction(this.pool, (client) => this.use(client, accountId, typed));
  }

  /** Turns off with a code (TOTP or recovery): true when the code was right. */
  async disable(accountId: string, typed: string, actor: AuditActor): Promise<boolean> {
    return withTransaction(this.pool, async (client) => {
      await lockAccountForAudit(client, accountId);
      const kind = await this.use(client, accountId, typed);
      if (!kind) return false;
      await repo.remove(client, accountId);
      await recordAudit(client, { accountId, actor, action: 'two_factor.disabled', details: { with: kind } });
      await queueSecurityNotice(client, accountId, { event: 'two_factor_disabled', ip: actor.ip ?? null });
      return true;
    });
  }
}

/**
 * An operator's reset for a customer who lost their second factor: the secret, the recovery codes
 * and any sign-in waiting for a code go. False when the account does not exist.
 */
export async function resetTwoFactor(
  pool: Pool,
  accountId: string,
  actor: AuditActor,
): Promise<{ wasEnabled: boolean } | undefined> {
  return withTransaction(pool, async (client) => {
    if (!(await repo.lockAccount(client, accountId))) return undefined;
    const wasEnabled = await repo.remove(client, accountId);
    // A reset while two-factor is off changed nothing: no entry (docs/security.md "Audit log").
    if (wasEnabled) {
      await recordAudit(client, { accountId, actor, action: 'two_factor.reset', details: { wasEnabled } });
      await queueSecurityNotice(client, accountId, { event: 'two_factor_reset', ip: null });
    }
    return { wasEnabled };
  });
}

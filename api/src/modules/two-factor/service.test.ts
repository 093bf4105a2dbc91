import { describe, expect, it } from '@jest/globals';
import * as OTPAuth from 'otpauth';
import {
  codeKind,
  codeStep,
  hashRecoveryCode,
  newRecoveryCodes,
  newSecret,
  otpauthUri,
  qrSvg,
  recoveryKeyFrom,
} from './service.ts';

const at = (secret: string, ms: number) =>
  new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) }).generate({ timestamp: ms });

describe('TOTP codes', () => {
  it('accepts a code of the step before, now and after, with that step; refuses two steps away', () => {
    const secret = newSecret();
    const now = 1_800_000_015_000; // 15 s into step 60,000,000
    const step = Math.floor(now / 30_000);
    for (const d of [-1, 0, 1]) expect(codeStep(secret, at(secret, now + d * 30_000), now)).toBe(step + d);
    for (const d of [-2, 2]) expect(codeStep(secret, at(secret, now + d * 30_000), now)).toBeUndefined();
    expect(codeStep(newSecret(), at(secret, now), now)).toBeUndefined();
  });

  it('the URI an authenticator app reads: issuer, account, SHA1, 6 digits, 30 s', () => {
    const uri = otpauthUri('JBSWY3DPEHPK3PXP', 'a+b@example.com');
    expect(uri).toBe(
      'otpauth://totp/proxyfleet:a%2Bb%40example.com?issuer=proxyfleet&secret=JBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30',
    );
  });

  it('the QR code is SVG paths with a label: no script, no style, no event handler', async () => {
    const svg = await qrSvg(otpauthUri(newSecret(), 'a@example.com'), 'QR "image" <of> it');
    expect(svg).toMatch(/^<svg role="img" aria-label="QR &#34;image&#34; &#60;of&#62; it" width="200"/);
    expect(svg).not.toMatch(/<script|style=|\bon[a-z]+=|href=/i);
    expect(svg.match(/<[a-z]+/g)!.sort()).toEqual(['<path', '<path', '<svg']);
  });
});

describe('recovery codes', () => {
  it('ten distinct codes of 12 characters in three groups, without 0, 1, l or o', () => {
    const codes = newRecoveryCodes();
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    for (const c of codes) expect(c).toMatch(/^[a-km-np-z2-9]{4}-[a-km-np-z2-9]{4}-[a-km-np-z2-9]{4}$/);
  });

  it('is typed with or without dashes and spaces, in any case; the hash is keyed', () => {
    const key = recoveryKeyFrom(Buffer.alloc(32, 1));
    const code = newRecoveryCodes()[0]!;
    for (const typed of [code, code.toUpperCase(), code.replace(/-/g, ''), code.replace(/-/g, ' ')]) {
      expect(codeKind(typed)).toBe('recovery_code');
      expect(hashRecoveryCode(key, typed)).toEqual(hashRecoveryCode(key, code));
    }
    expect(hashRecoveryCode(recoveryKeyFrom(Buffer.alloc(32, 2)), code)).not.toEqual(
      hashRecoveryCode(key, code),
    );
  });

  it('tells a TOTP code from a recovery code from neither', () => {
    expect(codeKind('123456')).toBe('totp');
    expect(codeKind(' 123 456 ')).toBe('totp');
    for (const typed of ['12345', '1234567', 'abcd-efgh-ijk0', 'abcd-efgh-jkm', '', '\0\0\0\0\0\0'])
      expect(codeKind(typed)).toBeUndefined();
  });
});

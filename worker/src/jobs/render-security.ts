// Security notices rendered when sent (docs/alerts.md "Security notices"): what happened to the
// account's sign-in, when and from where, and what to do if it was not the owner.
import { z } from 'zod';

const payload = z.object({
  event: z.enum(['two_factor_enabled', 'two_factor_disabled', 'two_factor_reset', 'new_browser_sign_in']),
  at: z.string(),
  ip: z.string().nullable(),
  browser: z.string().optional(),
});

const SUBJECTS = {
  two_factor_enabled: 'Two-factor authentication turned on',
  two_factor_disabled: 'Two-factor authentication turned off',
  two_factor_reset: 'Two-factor authentication reset by support',
  new_browser_sign_in: 'New sign-in to your dashboard',
} as const;

const WHAT = {
  two_factor_enabled: 'Two-factor authentication was turned on for your proxyfleet dashboard.',
  two_factor_disabled:
    'Two-factor authentication was turned off for your proxyfleet dashboard: signing in now needs only the password.',
  two_factor_reset:
    'Support reset two-factor authentication for your proxyfleet dashboard, as you asked: signing in now needs only the password.',
  new_browser_sign_in:
    'Someone signed in to your proxyfleet dashboard from a browser not used for it before.',
} as const;

/** "2026-11-29 06:41 UTC". */
const when = (iso: string) => `${new Date(iso).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

export function renderSecurityNotice(raw: unknown): { subject: string; body: string } {
  const p = payload.parse(raw);
  const lines = [
    WHAT[p.event],
    '',
    `When: ${when(p.at)}`,
    ...(p.event === 'two_factor_reset' ? [] : [`From: ${p.ip ?? 'an unknown address'}`]),
    ...(p.browser ? [`Browser: ${p.browser}`] : []),
    '',
    'If this was you, there is nothing to do.',
    'If it was not, set a new password now ("Forgot password?" on the sign-in page), which signs out every session, and contact support.',
  ];
  return { subject: SUBJECTS[p.event], body: `${lines.join('\n')}\n` };
}

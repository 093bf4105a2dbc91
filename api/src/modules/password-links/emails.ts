// The two emails that carry a link (outbox kinds added by migrations/0070_dashboard.sql). Plain
// text, like the alert emails the worker sends.

/** An invite (admin API, CLI) or a reset ("Forgot password?" on the dashboard). */
export type LinkPurpose = 'invite' | 'reset';

export interface LinkEmail {
  kind: 'dashboard_invite' | 'dashboard_reset';
  subject: string;
  text: string;
}

export function linkEmail(purpose: LinkPurpose, url: string, expiresAt: Date): LinkEmail {
  const until = expiresAt.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
  if (purpose === 'invite') {
    return {
      kind: 'dashboard_invite',
      subject: 'Your proxyfleet dashboard: set your password',
      text:
        `You have been invited to the proxyfleet dashboard, where you manage your API keys, proxies,\n` +
        `usage, alerts and billing.\n\nSet your password here (the link works once, until ${until}):\n\n${url}\n`,
    };
  }
  return {
    kind: 'dashboard_reset',
    subject: 'Reset your proxyfleet dashboard password',
    text:
      `Someone asked to reset the password of your proxyfleet dashboard.\n\n` +
      `Choose a new password here (the link works once, until ${until}):\n\n${url}\n\n` +
      `If this was not you, ignore this email: your password stays as it is.\n`,
  };
}

// Which SMTP failures are retried, how long the sender waits, and when the sender is registered.
import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { allJobs } from '../all-jobs.ts';
import { loadWorkerConfig } from '../config.ts';
import { classifySendError, EMAIL_RETRY_BASE_MS, EMAIL_RETRY_MAX_MS, retryDelayMs } from './email.ts';

const smtpError = (code: string, responseCode?: number) =>
  Object.assign(new Error('smtp'), { code, responseCode });

describe('classifySendError', () => {
  it.each([
    ['rejected recipient', smtpError('EENVELOPE', 550), 'permanent'],
    ['message refused', smtpError('EMESSAGE', 554), 'permanent'],
    ['mailbox busy', smtpError('EENVELOPE', 451), 'temporary'],
    ['server busy at DATA', smtpError('EMESSAGE', 421), 'temporary'],
    ['connection refused', smtpError('ESOCKET'), 'transport'],
    ['bare node socket error', smtpError('ECONNREFUSED'), 'transport'],
    ['timeout', smtpError('ETIMEDOUT'), 'transport'],
    // A wrong password is the operator's to fix, not the message's fault: keep the message.
    ['wrong SMTP password', smtpError('EAUTH', 535), 'transport'],
    ['no code at all', new Error('boom'), 'temporary'],
    ['not an error', 'boom', 'temporary'],
  ])('%s -> %s', (_name, err, expected) => {
    expect(classifySendError(err)).toBe(expected);
  });
});

describe('retryDelayMs', () => {
  it('doubles from the base and stops at the maximum', () => {
    expect(retryDelayMs(1)).toBe(EMAIL_RETRY_BASE_MS);
    expect(retryDelayMs(2)).toBe(2 * EMAIL_RETRY_BASE_MS);
    expect(retryDelayMs(4)).toBe(8 * EMAIL_RETRY_BASE_MS);
    expect(retryDelayMs(40)).toBe(EMAIL_RETRY_MAX_MS);
  });
});

describe('allJobs and email', () => {
  const capture = () => {
    const lines: string[] = [];
    const logger = createLogger(
      'test',
      'info',
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    return { lines, logger };
  };
  const from = 'proxyfleet <alerts@localhost>';
  const base = { ...loadWorkerConfig({}), PROXYFLEET_EMAIL_FROM: from };

  it('registers no sender and logs once that email is disabled when PROXYFLEET_SMTP_URL is unset', () => {
    const { lines, logger } = capture();
    const names = allJobs({ config: base, logger, registry: new Registry() }).map((j) => j.name);
    expect(names).not.toContain('email-sender');
    expect(names).toContain('balance-sweep');
    expect(lines.filter((l) => l.includes('email is disabled'))).toHaveLength(1);
  });

  it('registers the sender when PROXYFLEET_SMTP_URL is set', () => {
    const { lines, logger } = capture();
    const config = { ...base, PROXYFLEET_SMTP_URL: 'smtp://u:p@127.0.0.1:2525' };
    const names = allJobs({ config, logger, registry: new Registry() }).map((j) => j.name);
    expect(names).toContain('email-sender');
    expect(lines.filter((l) => l.includes('email is disabled'))).toEqual([]);
  });
});

describe('emails_total', () => {
  it('is exported with every outcome at zero before any email, also with email off', async () => {
    const registry = new Registry();
    allJobs({ config: loadWorkerConfig({}), logger: createLogger('test', 'silent'), registry });
    const text = await registry.metrics();
    for (const outcome of ['sent', 'retry', 'failed', 'dropped']) {
      expect(text).toContain(`proxyfleet_worker_emails_total{outcome="${outcome}"} 0`);
    }
  });
});

describe('email configuration', () => {
  it('defaults the sender address, leaves SMTP off, and rejects a URL that is not SMTP', () => {
    expect(loadWorkerConfig({})).toMatchObject({ PROXYFLEET_EMAIL_FROM: 'proxyfleet <alerts@localhost>' });
    expect(loadWorkerConfig({}).PROXYFLEET_SMTP_URL).toBeUndefined();
    expect(
      loadWorkerConfig({ PROXYFLEET_SMTP_URL: 'smtps://u:p@mail.example:465' }).PROXYFLEET_SMTP_URL,
    ).toBe('smtps://u:p@mail.example:465');
    expect(() => loadWorkerConfig({ PROXYFLEET_SMTP_URL: 'http://mail.example' })).toThrow(
      /PROXYFLEET_SMTP_URL/,
    );
  });
});

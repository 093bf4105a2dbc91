import { describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { Writable } from 'node:stream';
import { createLogger } from '#common/logger.ts';
import { AccessLog } from './access-log.ts';
import { refusalFor } from './refusals.ts';

function capture(level: 'info' | 'debug') {
  const lines: Record<string, unknown>[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: createLogger('test', level, out) };
}

/** A socket that was never connected: its counters are 0. */
const socket = () => new net.Socket();

describe('AccessLog sampling', () => {
  it('logs the sampled share at info and nothing else when the logger is at info', () => {
    const { lines, logger } = capture('info');
    const draws = [0.1, 0.6, 0.3, 0.9];
    const log = new AccessLog(logger, 'basic', 0.5, () => draws.shift()!);
    for (let i = 0; i < 4; i++) log.done('http', socket(), 200, undefined, performance.now());
    expect(lines.map((l) => l.level)).toEqual(['info', 'info']);
  });

  it('logs every line at debug, the sampled ones at info', () => {
    const { lines, logger } = capture('debug');
    const draws = [0.1, 0.6];
    const log = new AccessLog(logger, 'basic', 0.5, () => draws.shift()!);
    log.done('connect', socket(), 200, undefined, performance.now());
    log.done('connect', socket(), 200, undefined, performance.now());
    expect(lines.map((l) => l.level)).toEqual(['info', 'debug']);
  });

  it("logs the provider side's refusals at info whatever the sample, routine ones not", () => {
    const { lines, logger } = capture('info');
    const log = new AccessLog(logger, 'basic', 0, () => 0);
    for (const id of ['exit_failed', 'exit_connect_timeout', 'no_exit', 'billing_unavailable'] as const)
      log.refused('connect', socket(), refusalFor(id), true, performance.now());
    log.refused('http', socket(), refusalFor('wrong_password'), true, performance.now());
    log.refused('http', socket(), refusalFor('destination_refused'), true, performance.now());
    expect(lines.map((l) => l.reason)).toEqual([
      'exit_failed',
      'exit_timeout',
      'no_exit',
      'billing_unavailable',
    ]);
  });

  it('records a refusal nobody could be sent as client_abandoned with status 0', () => {
    const { lines, logger } = capture('debug');
    new AccessLog(logger, 'basic', 0).refused(
      'http',
      socket(),
      refusalFor('exit_failed'),
      false,
      performance.now(),
    );
    expect(lines[0]).toMatchObject({ status: 0, reason: 'client_abandoned' });
  });

  it('writes host:port only, never a path, query or userinfo', () => {
    const { lines, logger } = capture('debug');
    const log = new AccessLog(logger, 'basic', 0);
    log.done('http', socket(), 200, undefined, 0, 'GET', new URL('http://u:p@example.com/a/b?c=d'));
    log.done('connect', socket(), 200, undefined, 0, 'CONNECT', { host: '::1', port: 443 });
    expect(lines.map((l) => l.target)).toEqual(['example.com:80', '[::1]:443']);
  });
});

import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REFUSALS } from './refusals.ts';

describe('refusal table', () => {
  it('is the table docs/gateway.md lists, row for row', () => {
    const doc = readFileSync(path.join(import.meta.dirname, '../../../docs/gateway.md'), 'utf8');
    const section =
      doc.split('<!-- refusal-table:start -->')[1]?.split('<!-- refusal-table:end -->')[0] ?? '';
    const documented = section
      .split('\n')
      .filter((l) => /^\| \d{3} /.test(l))
      .map((l) =>
        l
          .split('|')
          .slice(1, 6)
          .map((c) => c.trim().replace(/`/g, '')),
      )
      .map(([status, error, reason, message, socks]) => `${status} ${error} ${reason} ${message} ${socks}`)
      .sort();
    const table = REFUSALS.map(
      (r) =>
        `${r.status} ${r.error} ${r.reason} ${r.message.replaceAll('{plan}', '<plan>')} 0x${r.socks.toString(16).padStart(2, '0')}`,
    ).sort();
    expect(documented).toEqual(table);
  });

  it('gives every reason label one status class', () => {
    const classes = new Map<string, Set<number>>();
    for (const r of REFUSALS)
      classes.set(r.reason, (classes.get(r.reason) ?? new Set()).add(Math.floor(r.status / 100)));
    for (const [reason, set] of classes) expect([reason, set.size]).toEqual([reason, 1]);
  });
});

import { describe, expect, it } from '@jest/globals';
import { formatList, listFile, listTemplate, MAX_TEMPLATE_LENGTH, type ProxyParts } from './list-format.ts';

const proxies: ProxyParts[] = [
  { host: 'gw.example.test', port: 8000, username: 'u1', password: 'p1_country-us' },
  { host: 'gw.example.test', port: 8000, username: 'u2-country-de', password: 'p2' },
];

describe('formatList', () => {
  it.each([
    ['colon', {}, ['gw.example.test:8000:u1:p1_country-us', 'gw.example.test:8000:u2-country-de:p2']],
    [
      'url',
      {},
      ['http://u1:p1_country-us@gw.example.test:8000', 'http://u2-country-de:p2@gw.example.test:8000'],
    ],
    [
      'url',
      { scheme: 'socks5h' },
      ['socks5h://u1:p1_country-us@gw.example.test:8000', 'socks5h://u2-country-de:p2@gw.example.test:8000'],
    ],
    [
      'template',
      { template: '{user}:{pass}@{host}:{port} {host}' },
      [
        'u1:p1_country-us@gw.example.test:8000 gw.example.test',
        'u2-country-de:p2@gw.example.test:8000 gw.example.test',
      ],
    ],
    [
      'csv',
      {},
      [
        'host,port,username,password',
        'gw.example.test,8000,u1,p1_country-us',
        'gw.example.test,8000,u2-country-de,p2',
      ],
    ],
    [
      'csv',
      { scheme: 'https' },
      [
        'host,port,username,password,url',
        'gw.example.test,8000,u1,p1_country-us,https://u1:p1_country-us@gw.example.test:8000',
        'gw.example.test,8000,u2-country-de,p2,https://u2-country-de:p2@gw.example.test:8000',
      ],
    ],
  ] as const)('%s %j', (format, options, lines) => {
    expect(formatList(proxies, format, options)).toEqual({ format, lines });
  });

  it('json: one object per proxy, with its URL only when a scheme is given', () => {
    expect(formatList(proxies, 'json').entries).toEqual(proxies);
    expect(formatList(proxies.slice(0, 1), 'json', { scheme: 'socks5h' }).entries).toEqual([
      { ...proxies[0], url: 'socks5h://u1:p1_country-us@gw.example.test:8000' },
    ]);
  });

  it('csv quotes a field holding a comma, a quote or a line break (RFC 4180)', () => {
    const odd = [{ host: 'a,b', port: 1, username: 'say "hi"', password: 'x\ny' }];
    expect(formatList(odd, 'csv').lines![1]).toBe('"a,b",1,"say ""hi""","x\ny"');
  });

  it('files: CSV with CRLF, JSON indented, lines with LF, each ending in a line break', () => {
    expect(listFile(formatList(proxies, 'csv'))).toBe(
      'host,port,username,password\r\ngw.example.test,8000,u1,p1_country-us\r\ngw.example.test,8000,u2-country-de,p2\r\n',
    );
    expect(JSON.parse(listFile(formatList(proxies, 'json')))).toEqual(proxies);
    expect(listFile(formatList(proxies, 'colon')).split('\n')).toHaveLength(3);
  });
});

describe('listTemplate', () => {
  it.each([
    ['{host}:{port}:{user}:{pass}', true],
    ['plain text, no placeholder', true],
    ['{ not a placeholder', true],
    ['x'.repeat(MAX_TEMPLATE_LENGTH), true],
  ])('accepts %j', (template, ok) => {
    expect(listTemplate.safeParse(template).success).toBe(ok);
  });

  it.each([
    ['{host}:{password}', 'has unknown placeholder {password}; use {host}, {port}, {user}, {pass}'],
    ['{HOST} {}', 'has unknown placeholder {HOST}, {}; use {host}, {port}, {user}, {pass}'],
    ['x'.repeat(MAX_TEMPLATE_LENGTH + 1), `must be at most ${MAX_TEMPLATE_LENGTH} characters`],
    ['{host}\n{port}', 'must be one line without control characters'],
  ])('refuses %j: %s', (template, message) => {
    const parsed = listTemplate.safeParse(template);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.message)).toContain(message);
  });
});

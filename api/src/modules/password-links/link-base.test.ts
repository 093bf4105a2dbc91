// The base of every link in an email (docs/security.md, "Links in emails"): the configured URL,
// else the API's own listen address; a wildcard listen address is written as 127.0.0.1.
import { describe, expect, it } from '@jest/globals';
import { linkBaseFrom } from './service.ts';

describe('linkBaseFrom', () => {
  it('takes the configured URL, without a trailing slash', () => {
    expect(linkBaseFrom('https://dash.example.test/', { host: '0.0.0.0', port: 8080 })).toBe(
      'https://dash.example.test',
    );
  });

  it.each([
    ['127.0.0.1', 'http://127.0.0.1:8080'],
    ['0.0.0.0', 'http://127.0.0.1:8080'],
    ['::', 'http://127.0.0.1:8080'],
    ['', 'http://127.0.0.1:8080'],
    ['::1', 'http://[::1]:8080'],
    ['api.internal', 'http://api.internal:8080'],
  ])('unset, listening on %j: %s', (host, base) => {
    expect(linkBaseFrom(undefined, { host, port: 8080 })).toBe(base);
  });
});

import { describe, expect, it } from '@jest/globals';
import { databaseUnavailable } from './unavailable.ts';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('databaseUnavailable', () => {
  it.each([
    [
      'PgBouncer: server login failing',
      withCode('08P01', 'server login has been failing, try again later (server_login_retry)'),
    ],
    ['PgBouncer: query_wait_timeout', withCode('08P01', 'query_wait_timeout')],
    ['connection failure', withCode('08006')],
    ['cannot connect now (starting up)', withCode('57P03')],
    ['administrator shutdown', withCode('57P01')],
    ['too many connections', withCode('53300', 'sorry, too many clients already')],
    ['a standby not yet promoted', withCode('25006', 'cannot execute INSERT in a read-only transaction')],
    ['refused', withCode('ECONNREFUSED')],
    ['reset', withCode('ECONNRESET')],
    ['pool wait', new Error('timeout exceeded when trying to connect')],
    ['connection ended', new Error('Connection terminated unexpectedly')],
    ['no answer', new Error('Query read timeout')],
  ])('%s: yes', (_, err) => expect(databaseUnavailable(err)).toBe(true));

  it.each([
    ['a unique violation', withCode('23505')],
    ['a syntax error', withCode('42601')],
    ['a statement timeout (the database answered)', withCode('57014')],
    ['any other error', new Error('boom')],
    ['not an error', 'ECONNREFUSED'],
  ])('%s: no', (_, err) => expect(databaseUnavailable(err)).toBe(false));
});

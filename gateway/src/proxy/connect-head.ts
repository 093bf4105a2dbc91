// The front end's CONNECT head parser (docs/adr/0027). It accepts only the plain form of a CONNECT
// head, a strict subset of RFC 9112 that llhttp accepts too, and reads from it what the tunnel
// needs: the request target and the first Proxy-Authorization value, as node:http would give them.
// Everything else is DECLINED as soon as the bytes seen show it, and the connection goes to
// node:http with those bytes unread: llhttp then refuses (400, 431) or accepts exactly as it
// always did. The parser therefore never refuses anything itself; a differential fuzz test
// against llhttp (connect-head.int.test.ts) proves that what it accepts, llhttp accepts alike.
import { ALNUM, charTable, FIELD_VALUE, TOKEN } from './http-util.ts';

/** More bytes are needed (everything so far fits the plain form). */
export const INCOMPLETE = 0;
/** Not the plain form of a CONNECT head: node:http parses it. */
export const DECLINE = 1;

export interface ConnectHead {
  /** The request target, as node:http's `req.url`. */
  target: string;
  /** The first Proxy-Authorization field value, trimmed, as node:http's `req.headers`. */
  proxyAuthorization: string | undefined;
  /** Length of the head, blank line included: what follows is the tunnel's first data. */
  length: number;
}

/**
 * Heads longer than this are declined (node:http answers 431 past its 16 KiB; a plain CONNECT
 * head is a few hundred bytes).
 */
export const MAX_HEAD_BYTES = 8_192;
/** More header fields than this are declined (node:http keeps at most 2,000). */
const MAX_FIELDS = 64;

const SP = 0x20;
const HTAB = 0x09;
const CR = 0x0d;
const LF = 0x0a;
const COLON = 0x3a;
const PREFIX = Buffer.from('CONNECT ', 'latin1');
const VERSION = Buffer.from('HTTP/1.', 'latin1');

/** authority-form targets only: reg-name or IPv4, an IPv6 literal in brackets, a port. */
const TARGET = charTable('-._~:[]%', ALNUM);
const PROXY_AUTHORIZATION = 'proxy-authorization';
// Framing fields on a CONNECT head are unusual and are where llhttp's own rules (duplicates,
// both at once, their syntax) decide: node:http parses such heads.
const DECLINED_FIELDS = new Set(['content-length', 'transfer-encoding']);

/** Whether `buf[at..]` starts with `bytes`; undefined when `buf` ends first and matches so far. */
function startsWith(buf: Buffer, at: number, bytes: Buffer): boolean | undefined {
  for (let i = 0; i < bytes.length; i++) {
    if (at + i >= buf.length) return undefined;
    if (buf[at + i] !== bytes[i]) return false;
  }
  return true;
}

/**
 * Parses the start of a connection's bytes: a complete plain CONNECT head, INCOMPLETE (all bytes
 * so far fit the plain form), or DECLINE (they do not, or they are not a CONNECT at all).
 */
export function parseConnectHead(buf: Buffer): ConnectHead | typeof INCOMPLETE | typeof DECLINE {
  const end = Math.min(buf.length, MAX_HEAD_BYTES);
  const more = () => (buf.length >= MAX_HEAD_BYTES ? DECLINE : INCOMPLETE);
  const method = startsWith(buf, 0, PREFIX);
  if (method === undefined) return more();
  if (!method) return DECLINE;
  // request-line = "CONNECT" SP authority SP "HTTP/1." ("0" / "1") CRLF
  let i = PREFIX.length;
  while (i < end && TARGET[buf[i]!]) i++;
  if (i === end) return more();
  if (i === PREFIX.length || buf[i] !== SP) return DECLINE;
  const target = buf.toString('latin1', PREFIX.length, i);
  i++;
  const version = startsWith(buf.subarray(0, end), i, VERSION);
  if (version === undefined) return more();
  if (!version) return DECLINE;
  i += VERSION.length;
  if (i === end) return more();
  if (buf[i] !== 0x30 && buf[i] !== 0x31) return DECLINE;
  i++;
  if (i === end) return more();
  if (buf[i] !== CR) return DECLINE;
  if (++i === end) return more();
  if (buf[i] !== LF) return DECLINE;
  i++;
  // *( field-name ":" OWS field-value OWS CRLF ) CRLF
  let proxyAuthorization: string | undefined;
  for (let fields = 0; ; fields++) {
    if (i === end) return more();
    if (buf[i] === CR) {
      if (++i === end) return more();
      if (buf[i] !== LF) return DECLINE;
      return { target, proxyAuthorization, length: i + 1 };
    }
    if (fields === MAX_FIELDS) return DECLINE;
    const nameStart = i;
    while (i < end && TOKEN[buf[i]!]) i++;
    if (i === end) return more();
    if (i === nameStart || buf[i] !== COLON) return DECLINE;
    const name = buf.toString('latin1', nameStart, i).toLowerCase();
    if (DECLINED_FIELDS.has(name)) return DECLINE;
    i++;
    const valueStart = i;
    while (i < end && FIELD_VALUE[buf[i]!]) i++;
    if (i === end) return more();
    if (buf[i] !== CR) return DECLINE;
    const valueEnd = i;
    if (++i === end) return more();
    if (buf[i] !== LF) return DECLINE;
    i++;
    if (name === PROXY_AUTHORIZATION && proxyAuthorization === undefined) {
      let from = valueStart;
      let to = valueEnd;
      while (from < to && (buf[from] === SP || buf[from] === HTAB)) from++;
      while (to > from && (buf[to - 1] === SP || buf[to - 1] === HTAB)) to--;
      proxyAuthorization = buf.toString('latin1', from, to);
    }
  }
}

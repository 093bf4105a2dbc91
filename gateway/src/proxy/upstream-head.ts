// The head of an upstream response, as the raw upstream client's parser (upstream-parser.ts) reads
// it (docs/adr/0038): where it ends, its status line and headers, strictly (a bare LF, an invalid
// status line or header, conflicting or invalid framing headers are refused, never repaired), and
// the framing of the body it announces: chunked, a Content-Length, or until the connection closes.
// Anything it does not accept is an UpstreamParseError (upstream.ts answers it 502).
import { allIn, FIELD_VALUE, TOKEN } from './http-util.ts';

/** Largest response head (status line and headers), node's default --max-http-header-size. */
export const MAX_HEAD_BYTES = 16 * 1024;

export const CR = 13;
export const LF = 10;

/** A response the parser refused; `code` follows llhttp's names where there is one. */
export class UpstreamParseError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

export interface ResponseHead {
  statusCode: number;
  statusMessage: string;
  /** HTTP minor version (0 or 1). */
  minor: number;
  rawHeaders: string[];
  /** Whether the connection may carry another request once this response is complete. */
  keepAlive: boolean;
  /** Seconds of the response's Keep-Alive: timeout=N hint (0: none). */
  keepAliveHint: number;
}

/** Index after the head's CRLFCRLF, or -1; throws on a bare LF (scanning from `from`). */
export function headEnd(buf: Buffer, from: number): number {
  let i = buf.indexOf(LF, from);
  // (A head ending past the limit is refused as too large, however the bytes were split.)
  while (i >= 0 && i <= MAX_HEAD_BYTES) {
    if (i === 0 || buf[i - 1] !== CR)
      throw new UpstreamParseError('HPE_CR_EXPECTED', 'bare LF in response head');
    if (i >= 3 && buf[i - 2] === LF && buf[i - 3] === CR) return i + 1;
    i = buf.indexOf(LF, i + 1);
  }
  return -1;
}

export type Framing = { kind: 'chunked' } | { kind: 'length'; length: number } | { kind: 'close' };

export interface ParsedHead extends ResponseHead {
  framing: Framing;
}

const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;

/** Parses a head (without its final CRLFCRLF; lines separated by CRLF, no bare LF). */
export function parseHead(text: string): ParsedHead {
  const lines = text.split('\r\n');
  const m = STATUS_LINE.exec(lines[0]!);
  if (!m) throw new UpstreamParseError('HPE_INVALID_STATUS', 'invalid status line');
  const minor = Number(m[1]);
  const statusCode = Number(m[2]);
  if (statusCode < 100) throw new UpstreamParseError('HPE_INVALID_STATUS', 'invalid status code');
  const rawHeaders: string[] = [];
  let contentLength: string | undefined;
  let te: string | undefined;
  let close = false;
  let keepAliveToken = false;
  let keepAliveHint = 0;
  for (let l = 1; l < lines.length; l++) {
    const line = lines[l]!;
    const c0 = line.charCodeAt(0);
    if (c0 === 0x20 || c0 === 0x09)
      throw new UpstreamParseError('HPE_INVALID_HEADER_TOKEN', 'obs-fold in response head');
    const colon = line.indexOf(':');
    if (colon <= 0) throw new UpstreamParseError('HPE_INVALID_HEADER_TOKEN', 'header line without a name');
    if (!allIn(TOKEN, line, 0, colon))
      throw new UpstreamParseError('HPE_INVALID_HEADER_TOKEN', 'invalid header name');
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (!allIn(FIELD_VALUE, value))
      throw new UpstreamParseError('HPE_INVALID_HEADER_TOKEN', 'invalid header value');
    rawHeaders.push(name, value);
    switch (name.length) {
      case 10:
        if (name.toLowerCase() === 'connection') {
          for (const t of value.split(',')) {
            const token = t.trim().toLowerCase();
            if (token === 'close') close = true;
            else if (token === 'keep-alive') keepAliveToken = true;
          }
        } else if (name.toLowerCase() === 'keep-alive') {
          const hint = /^timeout=(\d+)/.exec(value);
          if (hint) keepAliveHint = Number(hint[1]);
        }
        break;
      case 14:
        if (name.toLowerCase() === 'content-length') {
          if (!/^\d+$/.test(value) || value.length > 15) {
            throw new UpstreamParseError('HPE_INVALID_CONTENT_LENGTH', 'invalid Content-Length');
          }
          // A second one, even identical, as llhttp (RFC 9110 8.6 allows either).
          if (contentLength !== undefined) {
            throw new UpstreamParseError('HPE_UNEXPECTED_CONTENT_LENGTH', 'repeated Content-Length');
          }
          contentLength = value;
        }
        break;
      case 17:
        if (name.toLowerCase() === 'transfer-encoding') {
          // An empty one, even beside another, as llhttp (the fuzz test found `TE: ` + `TE: chunked`).
          if (value === '')
            throw new UpstreamParseError('HPE_INVALID_TRANSFER_ENCODING', 'empty Transfer-Encoding');
          te = te === undefined ? value : `${te}, ${value}`;
        }
        break;
    }
  }
  let framing: Framing;
  if (te !== undefined) {
    if (contentLength !== undefined) {
      throw new UpstreamParseError('HPE_UNEXPECTED_CONTENT_LENGTH', 'Content-Length with Transfer-Encoding');
    }
    const codings = te.split(',');
    if (codings[codings.length - 1]!.trim().toLowerCase() !== 'chunked') {
      throw new UpstreamParseError(
        'HPE_INVALID_TRANSFER_ENCODING',
        'Transfer-Encoding not ending in chunked',
      );
    }
    framing = { kind: 'chunked' };
  } else if (contentLength !== undefined) framing = { kind: 'length', length: Number(contentLength) };
  else framing = { kind: 'close' };
  const keepAlive = !close && (minor === 1 || keepAliveToken);
  return { statusCode, statusMessage: m[3] ?? '', minor, rawHeaders, keepAlive, keepAliveHint, framing };
}

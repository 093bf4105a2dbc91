// The raw upstream client's response parser (docs/adr/0038): one HTTP/1.1 response read
// incrementally from the socket's own buffers, strict (it refuses, it never repairs), with
// Content-Length bodies handed on as slices of those buffers, chunked bodies decoded, 1xx interim
// heads skipped. Anything it does not accept is an UpstreamParseError (upstream.ts answers it 502,
// as node's parse errors were).
import { allIn, FIELD_VALUE, TOKEN } from './http-util.ts';

/** Largest response head (status line and headers), node's default --max-http-header-size. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** Longest chunk-size line (with extensions) and trailer section accepted. */
const MAX_CHUNK_LINE = 4 * 1024;

const CR = 13;
const LF = 10;

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

export interface ParserEvents {
  head(head: ResponseHead): void;
  /** Body bytes: slices of the pushed buffers (never copied). */
  body(chunk: Buffer): void;
  /** false: the relay is paused; body bytes wait for proceed() (head and framing go on). */
  flowing(): boolean;
  /** The response is complete; `rest` holds bytes after it (there should be none). */
  complete(rest: boolean): void;
}

const State = {
  Head: 0,
  Fixed: 1,
  ChunkSize: 2,
  ChunkData: 3,
  ChunkDataEnd: 4,
  Trailers: 5,
  UntilClose: 6,
  Done: 7,
} as const;
type State = (typeof State)[keyof typeof State];

/**
 * Incremental parser of one response (after any 1xx interim heads, which it skips). Throws
 * UpstreamParseError from push() or end() on anything malformed.
 */
export class ResponseParser {
  private state: State = State.Head;
  private readonly noBody: boolean;
  private readonly events: ParserEvents;
  /** Head or chunk-line bytes not yet complete. */
  private pending: Buffer | undefined;
  private remaining = 0;
  private trailerBytes = 0;
  /** Whether a complete response was seen (after which push() must get nothing more). */
  get done(): boolean {
    return this.state === State.Done;
  }
  /** Whether any byte of a response arrived. */
  started = false;
  /** Whether bytes came after the complete response (the connection must not be reused). */
  trailing = false;

  constructor(requestIsHead: boolean, events: ParserEvents) {
    this.noBody = requestIsHead;
    this.events = events;
  }

  /** Bytes received but not parsed since body() asked to stop. */
  private stalled: Buffer | undefined;

  /** Parses what body() stopped before; returns false when it stopped again. */
  proceed(): boolean {
    const rest = this.stalled;
    if (!rest) return true;
    this.stalled = undefined;
    this.push(rest);
    return this.stalled === undefined;
  }

  push(data: Buffer): void {
    if (data.length > 0) this.started = true;
    if (this.stalled) {
      this.stalled = Buffer.concat([this.stalled, data]);
      return;
    }
    let buf = data;
    let i = 0;
    while (i < buf.length) {
      switch (this.state) {
        case State.Head: {
          const joined = this.pending ? Buffer.concat([this.pending, buf.subarray(i)]) : buf.subarray(i);
          const scanFrom = this.pending ? this.pending.length : 0;
          const end = headEnd(joined, scanFrom);
          if (end < 0) {
            if (joined.length > MAX_HEAD_BYTES)
              throw new UpstreamParseError('HPE_HEADER_OVERFLOW', 'response head too large');
            this.pending = Buffer.from(joined);
            return;
          }
          if (end > MAX_HEAD_BYTES)
            throw new UpstreamParseError('HPE_HEADER_OVERFLOW', 'response head too large');
          this.pending = undefined;
          const head = parseHead(joined.toString('latin1', 0, end - 4));
          buf = joined;
          i = end;
          if (head.statusCode < 200) {
            if (head.statusCode === 101)
              throw new UpstreamParseError('HPE_UNEXPECTED_UPGRADE', '101 without an upgrade');
            // An interim answer that closes the connection leaves no room for the final one (llhttp).
            if (!head.keepAlive)
              throw new UpstreamParseError('HPE_CLOSED_CONNECTION', 'interim response closes the connection');
            continue; // 100, 102, 103: interim, skipped as node's client does for forward.ts
          }
          this.begin(head);
          break;
        }
        case State.Fixed: {
          if (!this.events.flowing()) return this.stall(buf, i);
          const n = Math.min(this.remaining, buf.length - i);
          this.events.body(i === 0 && n === buf.length ? buf : buf.subarray(i, i + n));
          i += n;
          this.remaining -= n;
          if (this.remaining === 0) this.finish(i < buf.length);
          break;
        }
        case State.UntilClose:
          if (!this.events.flowing()) return this.stall(buf, i);
          this.events.body(i === 0 ? buf : buf.subarray(i));
          i = buf.length;
          break;
        case State.ChunkSize:
        case State.Trailers: {
          const lf = buf.indexOf(LF, i);
          const piece = buf.subarray(i, lf < 0 ? buf.length : lf + 1);
          const line = this.pending ? Buffer.concat([this.pending, piece]) : piece;
          if (lf < 0) {
            if (line.length > MAX_CHUNK_LINE)
              throw new UpstreamParseError('HPE_INVALID_CHUNK_SIZE', 'chunk line too long');
            this.pending = Buffer.from(line);
            return;
          }
          this.pending = undefined;
          i = lf + 1;
          if (line.length < 2 || line[line.length - 2] !== CR) {
            throw new UpstreamParseError('HPE_CR_EXPECTED', 'bare LF in chunked framing');
          }
          if (this.state === State.ChunkSize) {
            const size = chunkSize(line);
            if (size === 0) {
              this.state = State.Trailers;
              this.trailerBytes = 0;
            } else {
              this.remaining = size;
              this.state = State.ChunkData;
            }
          } else {
            if (line.length === 2) {
              this.finish(i < buf.length);
              break;
            }
            this.trailerBytes += line.length;
            if (this.trailerBytes > MAX_HEAD_BYTES)
              throw new UpstreamParseError('HPE_HEADER_OVERFLOW', 'trailers too large');
            checkTrailer(line);
          }
          break;
        }
        case State.ChunkData: {
          if (!this.events.flowing()) return this.stall(buf, i);
          const n = Math.min(this.remaining, buf.length - i);
          this.events.body(i === 0 && n === buf.length ? buf : buf.subarray(i, i + n));
          i += n;
          this.remaining -= n;
          if (this.remaining === 0) {
            this.state = State.ChunkDataEnd;
            this.remaining = 2;
          }
          break;
        }
        case State.ChunkDataEnd: {
          const expected = this.remaining === 2 ? CR : LF;
          if (buf[i] !== expected)
            throw new UpstreamParseError('HPE_STRICT', 'chunk data not followed by CRLF');
          i++;
          if (--this.remaining === 0) this.state = State.ChunkSize;
          break;
        }
        case State.Done:
          // Bytes after a complete response: not parsed, and the connection is not reused.
          this.trailing = true;
          return;
      }
    }
  }

  /** The upstream closed its side: completes a close-delimited body, else the answer was cut. */
  end(): void {
    if (this.stalled) throw new UpstreamParseError('ERR_STALLED', 'end while paused');
    if (this.state === State.UntilClose) return this.finish(false);
    if (this.state === State.Done) return;
    throw new UpstreamParseError(
      this.started ? 'HPE_INVALID_EOF_STATE' : 'ECONNRESET',
      this.started ? 'response cut short' : 'socket hang up',
    );
  }

  /** The final head (1xx ones never get here: push() skips or refuses them). */
  private begin(head: ParsedHead): void {
    const { framing, ...out } = head;
    const bodiless = this.noBody || head.statusCode === 204 || head.statusCode === 304;
    if (!bodiless && framing.kind === 'close') out.keepAlive = false;
    this.events.head(out);
    if (bodiless) return this.finish(false);
    if (framing.kind === 'chunked') this.state = State.ChunkSize;
    else if (framing.kind === 'length') {
      this.remaining = framing.length;
      this.state = State.Fixed;
      if (framing.length === 0) this.finish(false);
    } else this.state = State.UntilClose;
  }

  private stall(buf: Buffer, i: number): void {
    this.stalled = buf.subarray(i);
  }

  private finish(rest: boolean): void {
    this.state = State.Done;
    if (rest) this.trailing = true;
    this.events.complete(rest);
  }
}

/** Index after the head's CRLFCRLF, or -1; throws on a bare LF (scanning from `from`). */
function headEnd(buf: Buffer, from: number): number {
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

type Framing = { kind: 'chunked' } | { kind: 'length'; length: number } | { kind: 'close' };

interface ParsedHead extends ResponseHead {
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

/** The size of a chunk-size line (`line` ends in CRLF); extensions are ignored. */
function chunkSize(line: Buffer): number {
  const end = line.length - 2;
  let size = 0;
  let i = 0;
  for (; i < end; i++) {
    const c = line[i]!;
    const d =
      c >= 0x30 && c <= 0x39
        ? c - 0x30
        : c >= 0x61 && c <= 0x66
          ? c - 0x57
          : c >= 0x41 && c <= 0x46
            ? c - 0x37
            : -1;
    if (d < 0) break;
    if (i >= 12) throw new UpstreamParseError('HPE_INVALID_CHUNK_SIZE', 'chunk size too large');
    size = size * 16 + d;
  }
  if (i === 0) throw new UpstreamParseError('HPE_INVALID_CHUNK_SIZE', 'invalid chunk size');
  if (i < end) {
    if (line[i] !== 0x3b) throw new UpstreamParseError('HPE_INVALID_CHUNK_SIZE', 'invalid chunk size');
    if (!chunkExtensions(line, i, end)) throw new UpstreamParseError('HPE_STRICT', 'invalid chunk extension');
  }
  return size;
}

/**
 * Whether line[from, end) is `*( ";" token [ "=" ( token / quoted-string ) ] )` with no whitespace
 * (RFC 9112 7.1.1 without its BWS, as strict llhttp reads it); the extensions themselves are ignored.
 */
function chunkExtensions(line: Buffer, from: number, end: number): boolean {
  let i = from;
  while (i < end) {
    if (line[i] !== 0x3b) return false;
    const name = ++i;
    while (i < end && TOKEN[line[i]!]) i++;
    if (i === name) return false;
    if (i === end || line[i] === 0x3b) continue;
    if (line[i++] !== 0x3d) return false;
    if (line[i] === 0x22) {
      // quoted-string: qdtext (field-content but '"' and '\\') or a quoted-pair ('\\' and field-content)
      for (i++; ; i++) {
        if (i >= end) return false;
        const c = line[i]!;
        if (c === 0x22) break;
        if (c === 0x5c && ++i >= end) return false;
        if (!FIELD_VALUE[line[i]!]) return false;
      }
      i++;
    } else {
      const value = i;
      while (i < end && TOKEN[line[i]!]) i++;
      if (i === value) return false;
    }
  }
  return true;
}

function checkTrailer(line: Buffer): void {
  const text = line.toString('latin1', 0, line.length - 2);
  const colon = text.indexOf(':');
  if (colon <= 0) throw new UpstreamParseError('HPE_INVALID_HEADER_TOKEN', 'invalid trailer');
  if (!allIn(TOKEN, text, 0, colon))
    throw new UpstreamParseError('HPE_INVALID_HEADER_TOKEN', 'invalid trailer name');
  if (!allIn(FIELD_VALUE, text, colon + 1))
    throw new UpstreamParseError('HPE_INVALID_HEADER_TOKEN', 'invalid trailer value');
}

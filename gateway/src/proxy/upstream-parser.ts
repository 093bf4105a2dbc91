// The raw upstream client's response parser (docs/adr/0038): one HTTP/1.1 response read
// incrementally from the socket's own buffers, strict (it refuses, it never repairs), with
// Content-Length bodies handed on as slices of those buffers, chunked bodies decoded, 1xx interim
// heads skipped. The head's grammar and the framing it names are upstream-head.ts's; this file
// runs the states from one head to the end of its body. Anything it does not accept is an
// UpstreamParseError (upstream.ts answers it 502, as node's parse errors were).
import { allIn, FIELD_VALUE, TOKEN } from './http-util.ts';
import {
  CR,
  headEnd,
  LF,
  MAX_HEAD_BYTES,
  parseHead,
  UpstreamParseError,
  type ParsedHead,
  type ResponseHead,
} from './upstream-head.ts';

/** Longest chunk-size line (with extensions) and trailer section accepted. */
const MAX_CHUNK_LINE = 4 * 1024;

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

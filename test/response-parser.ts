// The raw upstream client's response parser driven as the relay drives it, for its tests
// (upstream-parser.test.ts, upstream-parser.int.test.ts): pieces as TCP reads, pauses, EOF.
import type { ResponseHead } from '../gateway/src/proxy/upstream-head.ts';
import { ResponseParser } from '../gateway/src/proxy/upstream-parser.ts';

export interface Parsed {
  head?: ResponseHead;
  body: Buffer;
  complete: boolean;
  /** Bytes came after the complete response. */
  rest: boolean;
  /** The UpstreamParseError's code. */
  error?: string;
}

/**
 * Feeds `pieces` to a parser (EOF after them when `eof`); what it produced. `pauseEvery`: the
 * relay pauses after every n-th body event and resumes before the next read (as a 'drain' would).
 */
export function parse(
  pieces: Buffer[],
  options: { head?: boolean; eof?: boolean; pauseEvery?: number } = {},
): Parsed {
  const out: Parsed = { body: Buffer.alloc(0), complete: false, rest: false };
  const body: Buffer[] = [];
  let flowing = true;
  let bodyEvents = 0;
  const parser = new ResponseParser(options.head === true, {
    head: (h) => (out.head = h),
    body: (c) => {
      body.push(Buffer.from(c));
      if (options.pauseEvery && ++bodyEvents % options.pauseEvery === 0) flowing = false;
    },
    flowing: () => flowing,
    complete: () => (out.complete = true),
  });
  try {
    for (const p of pieces) {
      parser.push(p);
      // A paused relay resumes before the next read (as a 'drain' would).
      while (!flowing) {
        flowing = true;
        parser.proceed();
      }
    }
    if (options.eof) parser.end();
  } catch (err) {
    out.error = (err as { code: string }).code;
  }
  out.body = Buffer.concat(body);
  out.rest = parser.trailing;
  return out;
}

/** Splits `buf` at the given cut points (any order, duplicates allowed). */
export function split(buf: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let at = 0;
  for (const p of points) {
    out.push(buf.subarray(at, p));
    at = p;
  }
  out.push(buf.subarray(at));
  return out;
}

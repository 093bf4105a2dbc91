import { describe, expect, it } from '@jest/globals';
import { ephemeralRange, SourcePorts } from './source-ports.ts';

const proc = (files: Record<string, string>) => (file: string) => {
  const text = files[file];
  if (text === undefined) throw new Error(`ENOENT ${file}`);
  return text;
};

describe('ephemeralRange', () => {
  it('reads the port range and the reserved ports', () => {
    const range = ephemeralRange(
      proc({
        '/proc/sys/net/ipv4/ip_local_port_range': '40000\t40009\n',
        '/proc/sys/net/ipv4/ip_local_reserved_ports': '40003,40005-40007\n',
      }),
    );
    expect(range).toEqual({ low: 40000, high: 40009, reserved: new Set([40003, 40005, 40006, 40007]) });
  });

  it("falls back to Linux's default range without /proc", () => {
    expect(ephemeralRange(proc({}))).toEqual({ low: 32768, high: 60999, reserved: new Set() });
  });
});

describe('SourcePorts', () => {
  it('takes the odd ports of the range in turn, skipping reserved ones, from a random start', () => {
    const ports = new SourcePorts({ low: 40000, high: 40010, reserved: new Set([40005]) }, () => 0.5);
    expect(ports.size).toBe(4);
    expect(Array.from({ length: 6 }, () => ports.next())).toEqual([40007, 40009, 40001, 40003, 40007, 40009]);
  });

  it('refuses a range without a usable port', () => {
    expect(() => new SourcePorts({ low: 40000, high: 40001, reserved: new Set([40001]) })).toThrow(
      /no usable/,
    );
  });
});

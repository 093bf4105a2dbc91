// Summarises V8 CPU profiles (`BENCH_PROFILE=1 npm run bench:gateway` writes them to
// /tmp/pf-bench-prof): per profile, the top self-time frames and, with --group, the share of busy
// time whose stack passes through frames matching each pattern. Busy time excludes idle and
// module loading at start-up (the proxies are profiled from their start; its share is printed).
//   node loadtest/profile-summary.ts [--top N] [--group 'label=regexp' ...] FILE.cpuprofile...
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '20' }, group: { type: 'string', multiple: true, default: [] } },
});
const STARTUP = /compileSourceTextModule|compileForInternalLoader|wrapSafe|loader|__require/;
const groups = values.group.map((g) => {
  const at = g.indexOf('=');
  return { label: g.slice(0, at), pattern: new RegExp(g.slice(at + 1)) };
});

const frameName = (n: ProfileNode) =>
  `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\//, '')}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`;

for (const file of positionals) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const grouped = new Map(groups.map((g) => [g.label, 0]));
  let busy = 0;
  let total = 0;
  let startup = 0;
  for (const [i, sample] of profile.samples.entries()) {
    const dt = profile.timeDeltas[i] ?? 0;
    total += dt;
    const node = byId.get(sample)!;
    if (node.callFrame.functionName === '(idle)') continue;
    const stack: string[] = [];
    for (let id: number | undefined = sample; id !== undefined; id = parent.get(id))
      stack.push(frameName(byId.get(id)!));
    const text = stack.join('\n');
    if (STARTUP.test(text)) {
      startup += dt;
      continue;
    }
    busy += dt;
    self.set(frameName(node), (self.get(frameName(node)) ?? 0) + dt);
    for (const g of groups) if (g.pattern.test(text)) grouped.set(g.label, grouped.get(g.label)! + dt);
  }
  const pct = (v: number) => `${((v / busy) * 100).toFixed(1).padStart(5)} %`;
  console.log(
    `${file}: ${(total / 1e6).toFixed(1)} s profiled, ${(startup / 1e6).toFixed(1)} s loading modules, ${(busy / 1e6).toFixed(1)} s busy after that; shares of busy time`,
  );
  for (const [name, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top)))
    console.log(`  ${pct(v)}  ${name}`);
  for (const [label, v] of grouped) console.log(`  ${pct(v)}  [stack through ${label}]`);
}

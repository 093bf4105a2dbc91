// The failover scenario's report: its log line, verdicts and figures, written to its results
// directory as verdicts.md and verdicts.json at the end (loadtest/scenarios/failover.ts).
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { REPO_ROOT } from '../fleet/fleet.ts';
import type { Verdict } from '../run/context.ts';

export class Report {
  readonly verdicts: Verdict[] = [];
  readonly figures: [string, string][] = [];
  readonly startedAt = Date.now();
  readonly dir: string;
  private readonly title: string;

  constructor(title: string, dir: string) {
    this.title = title;
    this.dir = dir;
  }

  say(line: string): void {
    process.stdout.write(
      `[${this.title} ${((Date.now() - this.startedAt) / 1000).toFixed(1).padStart(6)}s] ${line}\n`,
    );
  }

  judge(name: string, ok: boolean, detail: string, soft = false): void {
    this.verdicts.push({ name, ok, soft, detail });
    this.say(`${ok ? 'PASS' : soft ? 'WARN' : 'FAIL'} ${name}: ${detail}`);
  }

  figure(name: string, value: string | number): void {
    this.figures.push([name, String(value)]);
  }

  get ok(): boolean {
    return this.verdicts.every((v) => v.ok || v.soft);
  }

  /** Writes verdicts.md and verdicts.json; true when every verdict held. */
  async finish(extra: Record<string, unknown> = {}): Promise<boolean> {
    const cell = (s: string) => s.replaceAll('|', '\\|');
    const md = [
      `# ${this.title}`,
      '',
      '| assertion | result | detail |',
      '|---|---|---|',
      ...this.verdicts.map(
        (v) => `| ${v.name} | ${v.ok ? 'PASS' : v.soft ? 'WARN' : 'FAIL'} | ${cell(v.detail)} |`,
      ),
      '',
      '| figure | value |',
      '|---|---|',
      ...this.figures.map(([k, v]) => `| ${k} | ${cell(v)} |`),
      '',
    ].join('\n');
    await writeFile(path.join(this.dir, 'verdicts.md'), md);
    await writeFile(
      path.join(this.dir, 'verdicts.json'),
      JSON.stringify(
        { ok: this.ok, verdicts: this.verdicts, figures: Object.fromEntries(this.figures), ...extra },
        null,
        2,
      ),
    );
    this.say(
      `${this.ok ? 'all assertions held' : 'SOME ASSERTIONS FAILED'}; table in ${path.relative(REPO_ROOT, path.join(this.dir, 'verdicts.md'))}`,
    );
    return this.ok;
  }
}

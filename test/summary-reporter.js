// Ends every jest run with one plain line, "N passed, N failed" (plus skipped), so CI records
// what ran. Written at process exit so that it follows jest's own summary.
// With PROXYFLEET_JEST_TIMES set to a file path, it also writes there, as JSON, each project's
// time (`.ci/run` prints them among its phase times): its files, the span from its first file's
// start to its last file's end (projects run side by side, so spans overlap), and the sum of its
// files' times; plus the whole run's time and the summary line.
import { writeFileSync, writeSync } from 'node:fs';

export default class SummaryReporter {
  projects = new Map();

  onTestResult(test, testResult) {
    const name = test.context?.config?.displayName?.name ?? 'default';
    const { start, end } = testResult.perfStats;
    const p = this.projects.get(name) ?? { files: 0, start, end, sumMs: 0 };
    p.files += 1;
    p.start = Math.min(p.start, start);
    p.end = Math.max(p.end, end);
    p.sumMs += end - start;
    this.projects.set(name, p);
  }

  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    const line =
      `${results.numPassedTests} passed, ${results.numFailedTests} failed` +
      (skipped ? `, ${skipped} skipped` : '');
    const file = process.env.PROXYFLEET_JEST_TIMES;
    if (file) {
      const projects = Object.fromEntries(
        [...this.projects].map(([name, p]) => [
          name,
          {
            files: p.files,
            spanSeconds: Math.round((p.end - p.start) / 1000),
            sumSeconds: Math.round(p.sumMs / 1000),
          },
        ]),
      );
      const runSeconds = Math.round((Date.now() - results.startTime) / 1000);
      writeFileSync(file, `${JSON.stringify({ runSeconds, projects, summary: line })}\n`);
    }
    process.once('exit', () => writeSync(1, `\n${line}\n`));
  }
}

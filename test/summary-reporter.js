// Ends every jest run with one plain line, "N passed, N failed" (plus skipped), so CI records
// what ran. Written at process exit so that it follows jest's own summary.
import { writeSync } from 'node:fs';

export default class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    const line =
      `${results.numPassedTests} passed, ${results.numFailedTests} failed` +
      (skipped ? `, ${skipped} skipped` : '');
    process.once('exit', () => writeSync(1, `\n${line}\n`));
  }
}

// Counts in words for pages and emails: "1 ISP proxy", "2 ISP proxies", "1 entry", "0 entries".
// (Error messages write `{n|unit}` templates instead: formatMessage in errors.ts.)

/** `n` with its noun in the right number; `plural` when adding "s" is wrong ("entries"). */
export function countOf(n: number, singular: string, plural = `${singular}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? singular : plural}`;
}

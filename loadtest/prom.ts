// Prometheus's HTTP API, the part the load test uses: instant queries.
import { z } from 'zod';

const vectorResponse = z.object({
  status: z.literal('success'),
  data: z.object({
    resultType: z.string(),
    result: z.array(
      z.object({ metric: z.record(z.string(), z.string()), value: z.tuple([z.number(), z.string()]) }),
    ),
  }),
});
export type Sample = { labels: Record<string, string>; value: number };

export class Prometheus {
  readonly url: string;
  constructor(url: string) {
    this.url = url;
  }

  /** An instant query (at `time`, in seconds since the epoch, or now). */
  async query(expr: string, time?: number): Promise<Sample[]> {
    const params = new URLSearchParams({ query: expr });
    if (time !== undefined) params.set('time', String(time));
    const res = await fetch(`${this.url}/api/v1/query?${params.toString()}`, {
      signal: AbortSignal.timeout(10_000),
    });
    const body: unknown = await res.json();
    if (!res.ok) throw new Error(`Prometheus ${res.status} for ${expr}: ${JSON.stringify(body)}`);
    const parsed = vectorResponse.parse(body);
    return parsed.data.result.map((r) => ({ labels: r.metric, value: Number(r.value[1]) }));
  }

  /** The sum of a query's samples (0 when it has none). */
  async scalar(expr: string, time?: number): Promise<number> {
    return (await this.query(expr, time)).reduce((s, x) => s + x.value, 0);
  }
}

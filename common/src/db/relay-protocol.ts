// The change relay's stream (docs/adr/0105): one WebSocket per process, JSON text messages. The
// relay sends, each with `seq`: one sequence of the relay's for all its connections, each batch
// one more than the last; a connection's first message carries the current number (any: the
// process takes it as it comes) and a beat repeats the last:
//   snapshot  every account's credential row at `version`, and the ids applied within the
//             catch-up overlap below it (the client's dedup set)
//   changes   a batch of change_log rows, each with the rows it changed
//   beat      the relay's version and how long ago its own feed heard from the database
// The process sends `ack` (the version it applied) and `bye` (it stops: its ack row goes).
// The process names what it has in the URL: ?version=&component=&instance=.
import { z } from 'zod';

const uuid = z.string().min(1);
const credentialRow = z.object({
  account_id: uuid,
  username: z.string(),
  password_sha256: z.string().regex(/^[0-9a-f]*$/),
  status: z.enum(['active', 'suspended']),
  throttles: z.record(z.string(), z.number()).nullable(),
  allowlist: z
    .array(
      z.object({ id: z.string(), product: z.string(), cidr: z.string(), targeting: z.string().nullable() }),
    )
    .nullable(),
  sub_users: z
    .array(
      z.object({
        id: z.string(),
        username: z.string(),
        password_sha256: z.string().regex(/^[0-9a-f]*$/),
        status: z.enum(['active', 'suspended']),
        max_connections: z.number().nullable(),
        bytes_per_second: z.union([z.number(), z.string()]).nullable(),
      }),
    )
    .nullable(),
});
const keyRow = z.object({
  keyId: z.string(),
  accountId: uuid,
  revoked: z.boolean(),
  status: z.enum(['active', 'suspended']),
});
const change = z.object({
  id: z.number().int().positive(),
  kind: z.enum(['api_key', 'proxy_credentials', 'account', 'balance', 'isp_proxy', 'give_back']),
  accountId: uuid,
  subject: z.string().nullable(),
  credentials: credentialRow.nullable().optional(),
  apiKey: keyRow.nullable().optional(),
});
const seq = z.number().int().nonnegative();

export const relayMessage = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('snapshot'),
    seq,
    version: z.number().int().nonnegative(),
    applied: z.array(z.number().int()),
    credentials: z.array(credentialRow),
  }),
  z.object({ type: z.literal('changes'), seq, changes: z.array(change) }),
  z.object({
    type: z.literal('beat'),
    seq,
    version: z.number().int().nonnegative(),
    /** Milliseconds since the relay's feed heard from the database; null: it is not connected. */
    silenceMs: z.number().nonnegative().nullable(),
  }),
]);
export type RelayMessage = z.infer<typeof relayMessage>;

export const clientMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ack'), version: z.number().int().nonnegative() }),
  z.object({ type: z.literal('bye') }),
]);
export type ClientMessage = z.infer<typeof clientMessage>;

/** WebSocket close code of a relay that is behind the process asking: try another, or later. */
export const RELAY_BEHIND = 4001;
/** WebSocket close code of a relay not yet loaded (start-up). */
export const RELAY_NOT_READY = 4002;

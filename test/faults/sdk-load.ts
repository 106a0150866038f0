// Load from official MCP SDK clients with a record of every call, for the fault tests and
// `npm run loadtest -- faults`: what each call answered (ok, or the relay's error code), when it
// started and ended. Summaries say what a fault cost: calls failed by code, the slowest answer,
// when calls succeeded again, and a timeline of calls/s and errors for the report's chart.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { setMaxListeners } from 'node:events';

export interface Call {
  client: string;
  start: number;
  end: number;
  /** `ok`, the relay's error code (`relay_unavailable`, `timeout`, …), `http_<status>`, or `client_timeout`. */
  outcome: string;
}

export interface SdkClient {
  name: string;
  client: Client;
  transport: StreamableHTTPClientTransport;
  close(): Promise<void>;
}

export async function sdkClient(name: string, base: string, token: string): Promise<SdkClient> {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { 'X-Api-Key': token } },
    // Every request of a transport shares its AbortSignal, and Node's fetch drops its listener
    // on it only when the request is collected: thousands of calls would warn of a leak.
    fetch: (url, init) => {
      if (init?.signal) setMaxListeners(0, init.signal);
      return fetch(url, init);
    },
  });
  const client = new Client({ name: `faults-${name}`, version: '1.0.0' });
  await client.connect(transport);
  return { name, client, transport, close: () => client.close().catch(() => {}) };
}

/** What a failed call says, as one word. */
export function classify(err: unknown): string {
  if (err instanceof McpError) {
    const data = err.data as { code?: string } | undefined;
    if (data?.code) return data.code;
    if (err.code === -32001) return 'client_timeout'; // the SDK's own request timeout
    return `jsonrpc_${err.code}`;
  }
  if (err instanceof StreamableHTTPError) {
    // The body is a JSON-RPC error (data.code) or {"error": code}.
    const m = /"(?:code|error)"\s*:\s*"([a-z_]+)"/.exec(err.message);
    return m ? `http_${err.code}_${m[1]}` : `http_${err.code}`;
  }
  return `transport:${(err as Error)?.message?.slice(0, 60) ?? String(err)}`;
}

export interface Load {
  calls: Call[];
  stop(): Promise<Call[]>;
}

/**
 * `loops` concurrent call loops per client until stop(). Each call is `echo`, with the SDK's
 * request timeout at `clientTimeoutMs` (longer than the relay's deadline, so a call the relay
 * left hanging shows as `client_timeout`). After a failure a loop pauses `pauseMs`.
 */
export function runSdkLoad(
  clients: SdkClient[],
  o: { loops?: number; clientTimeoutMs: number; pauseMs?: number },
): Load {
  const calls: Call[] = [];
  let stopped = false;
  let n = 0;
  const loops = clients.flatMap((c) =>
    Array.from({ length: o.loops ?? 2 }, async () => {
      while (!stopped) {
        const text = `${c.name}#${n++}`;
        const start = Date.now();
        let outcome: string;
        try {
          const r = await c.client.callTool({ name: 'echo', arguments: { text } }, undefined, {
            timeout: o.clientTimeoutMs,
          });
          const got = (r.content as Array<{ text?: string }>)[0]?.text;
          outcome = got === text ? 'ok' : `wrong_answer`;
        } catch (err) {
          outcome = classify(err);
        }
        calls.push({ client: c.name, start, end: Date.now(), outcome });
        if (outcome !== 'ok') await new Promise((r) => setTimeout(r, o.pauseMs ?? 50));
      }
    }),
  );
  return {
    calls,
    async stop() {
      stopped = true;
      await Promise.all(loops);
      return calls;
    },
  };
}

export interface FaultSummary {
  fault: string;
  calls: number;
  /** Failed calls by outcome. */
  failed: Record<string, number>;
  /** Failed calls by client (`local`: on the phone's node; `remote`: through another node). */
  failedByClient: Record<string, number>;
  /** The slowest answer of the whole window, ms. */
  slowestMs: number;
  /** The slowest answer among calls that started while the fault was on, ms. */
  slowestDuringMs: number;
  /** Median duration of calls that started while the fault was on / before it. */
  medianDuringMs: number;
  medianBeforeMs: number;
  /** From the fault's removal until every client had a call that started after it succeed, ms. */
  recoveredMs: number | null;
  /** From the fault's start until the first failed call ended, ms (null: nothing failed). */
  firstFailureMs: number | null;
}

const median = (xs: number[]) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

export function summarize(fault: string, calls: Call[], onAt: number, offAt: number): FaultSummary {
  const failed: Record<string, number> = {};
  const failedByClient: Record<string, number> = {};
  for (const c of calls) {
    if (c.outcome === 'ok') continue;
    failed[c.outcome] = (failed[c.outcome] ?? 0) + 1;
    failedByClient[c.client] = (failedByClient[c.client] ?? 0) + 1;
  }
  const dur = (c: Call) => c.end - c.start;
  const during = calls.filter((c) => c.start >= onAt && c.start < offAt);
  const before = calls.filter((c) => c.end < onAt);
  const names = [...new Set(calls.map((c) => c.client))];
  const firstOk = names.map(
    (n) =>
      calls.filter((c) => c.client === n && c.start >= offAt && c.outcome === 'ok').sort((a, b) => a.end - b.end)[0],
  );
  const firstFail = calls.filter((c) => c.outcome !== 'ok' && c.end >= onAt).sort((a, b) => a.end - b.end)[0];
  return {
    fault,
    calls: calls.length,
    failed,
    failedByClient,
    slowestMs: Math.max(0, ...calls.map(dur)),
    slowestDuringMs: Math.max(0, ...during.map(dur)),
    medianDuringMs: median(during.map(dur)),
    medianBeforeMs: median(before.map(dur)),
    recoveredMs: firstOk.every(Boolean) ? Math.max(...firstOk.map((c) => c.end)) - offAt : null,
    firstFailureMs: firstFail ? firstFail.end - onAt : null,
  };
}

/** Calls/s and failures/s per `stepMs` bucket, from `t0`: the report's chart. */
export function timeline(calls: Call[], t0: number, stepMs = 500): Array<{ t: number; ok: number; failed: number }> {
  const end = Math.max(t0, ...calls.map((c) => c.end));
  const out = Array.from({ length: Math.ceil((end - t0) / stepMs) + 1 }, (_, i) => ({
    t: (i * stepMs) / 1000,
    ok: 0,
    failed: 0,
  }));
  for (const c of calls) {
    const b = out[Math.floor((c.end - t0) / stepMs)];
    if (!b) continue;
    if (c.outcome === 'ok') b.ok += 1000 / stepMs;
    else b.failed += 1000 / stepMs;
  }
  return out;
}

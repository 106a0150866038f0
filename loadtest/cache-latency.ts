// A performance check of the relay's caches: tools/list and server/discover are answered from the relay's
// cache, so they must cost no round trip to the phone. Compares their p50/p99 against a
// forwarded tools/call, in one run, sequential requests over keep-alive HTTP on 127.0.0.1.
// Run: npx tsx loadtest/cache-latency.ts [--n 2000]
import { parseArgs } from 'node:util';
import { startTestPhone, startTestRelay } from '../test/helpers/relay.ts';
import { createEchoServer } from '../test/fixtures/echo-server.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '2000' } } });
const N = Math.min(20_000, Number(values.n));

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export async function runCacheLatency(n = N): Promise<Record<string, { p50: number; p99: number }>> {
  const relay = await startTestRelay();
  const phone = await startTestPhone(relay, () => createEchoServer());
  const token = (await relay.key(phone.deviceId)).token;
  try {
    const init = await fetch(relay.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': token },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
      }),
    });
    const sid = init.headers.get('mcp-session-id')!;
    await init.text();
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const cases: Record<string, { headers: Record<string, string>; body: (i: number) => string }> = {
      'tools/list (cache)': {
        headers: { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
        body: (i) => JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/list' }),
      },
      'server/discover (cache)': {
        headers: { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' },
        body: (i) => JSON.stringify({ jsonrpc: '2.0', id: i, method: 'server/discover', params: { _meta: meta } }),
      },
      'tools/call (forwarded)': {
        headers: { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
        body: (i) =>
          JSON.stringify({
            jsonrpc: '2.0',
            id: i,
            method: 'tools/call',
            params: { name: 'echo', arguments: { text: 'x' } },
          }),
      },
    };
    const out: Record<string, { p50: number; p99: number }> = {};
    // Interleaved rounds so machine noise hits every case alike.
    const samples: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
    for (let i = 0; i < n; i++) {
      for (const [name, c] of Object.entries(cases)) {
        const t0 = performance.now();
        const r = await fetch(relay.mcpUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': token, ...c.headers },
          body: c.body(i),
        });
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`${name}: HTTP ${r.status}`);
        if (i >= 50) samples[name].push(performance.now() - t0); // skip warm-up
      }
    }
    for (const [name, s] of Object.entries(samples)) {
      s.sort((a, b) => a - b);
      out[name] = { p50: +pct(s, 50).toFixed(3), p99: +pct(s, 99).toFixed(3) };
    }
    return out;
  } finally {
    await phone.stop();
    await relay.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runCacheLatency();
  console.table(r);
  process.exit(0);
}

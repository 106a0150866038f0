// docs/SECURITY.md, "the logs (flooding, leaking) | anyone | client-supplied values cut at 128
// characters"; docs/OPERATIONS.md, "Logs": "What a client sent (a header such as `X-Device-Id`, a
// `client_id` URL) appears cut at 128 characters" (MAX_LOGGED_VALUE, src/log.ts). Anyone (no
// account, no cookie) who opens /account/authorize with a client_id URL the relay refuses writes
// the `client metadata document refused` line: its clientId, and a reason that may repeat the URL,
// are cut as logValue cuts them, not up to 2,000 characters of the caller's choosing.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger, MAX_LOGGED_VALUE } from '../../src/log.ts';
import { startHostedRelay, type HostedRelay } from './hosted-relay.ts';

const lines: string[] = [];
let h: HostedRelay;

beforeAll(async () => {
  h = await startHostedRelay({
    relayOptions: {
      log: createLogger({ level: 'trace', destination: { write: (l: string) => void lines.push(l) } }),
      // The name resolves to nothing: refused before any fetch (no network needed).
      hosted: { clientMetadata: { resolve: () => Promise.resolve([]) } },
    },
  });
}, 60_000);
afterAll(async () => {
  await h?.stop();
});

async function refusedLine(clientId: string): Promise<Record<string, unknown>> {
  const before = lines.length;
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: 'http://127.0.0.1:9/callback',
    code_challenge: 'x'.repeat(43),
    code_challenge_method: 'S256',
  });
  const r = await fetch(`${h.url}/account/authorize?${q}`, { redirect: 'manual' });
  await r.text();
  expect(r.status).toBe(400);
  const refused = lines
    .slice(before)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === 'client metadata document refused');
  expect(refused.length).toBe(1);
  return refused[0];
}

// Cut as logValue cuts: the first 128 characters, then the length.
const cut = (v: string) => `${v.slice(0, MAX_LOGGED_VALUE)}…(${v.length} chars)`;

it('a refused client_id URL is logged cut at 128 characters, as every client-supplied value', async () => {
  const clientId = `https://client.example/${'a'.repeat(1800)}.json`;
  const line = await refusedLine(clientId);
  expect(line.clientId).toBe(cut(clientId));
  expect(String(line.reason).length).toBeLessThanOrEqual(MAX_LOGGED_VALUE + 32);
});

it('a reason that repeats the URL (not in normal form) is cut too', async () => {
  const clientId = `https://CLIENT.example/${'b'.repeat(1800)}.json`;
  const line = await refusedLine(clientId);
  expect(line.clientId).toBe(cut(clientId));
  expect(String(line.reason)).toMatch(/^client_id must be written in normal form \(https:\/\/client\.example\/b+/);
  expect(String(line.reason).length).toBeLessThanOrEqual(MAX_LOGGED_VALUE + 32);
});

// A hand-driven phone socket for bad-input tests: every header under the test's control.
import WebSocket from 'ws';
import {
  generateDeviceKey,
  loadPrivateKey,
  signDevicePayload,
  signedPayload,
  decodeNonce,
  type DeviceKeyPair,
} from '../../src/crypto/device-auth.ts';

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any; headers: Headers }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: r.status, json, headers: r.headers };
}

export interface RawPhone {
  key: DeviceKeyPair;
  deviceId: string;
  relayHost: string;
}

export async function pairRaw(relayUrl: string, code: string, key = generateDeviceKey()): Promise<RawPhone> {
  const r = await postJson(`${relayUrl}/pair`, { code, public_key: key.publicKeySpkiBase64, name: 'raw' });
  if (r.status !== 200) throw new Error(`pair failed: ${r.status} ${JSON.stringify(r.json)}`);
  return { key, deviceId: r.json.device_id, relayHost: r.json.relay_host };
}

export async function challenge(relayUrl: string, deviceId: string): Promise<string> {
  const r = await postJson(`${relayUrl}/device/challenge`, { device_id: deviceId });
  return r.json.nonce;
}

export function signedHeaders(
  phone: RawPhone,
  nonce: string,
  opts: { ts?: number; host?: string; key?: DeviceKeyPair } = {},
): Record<string, string> {
  const ts = String(opts.ts ?? Math.floor(Date.now() / 1000));
  const sig = signDevicePayload(
    loadPrivateKey((opts.key ?? phone.key).privateKeyPem),
    signedPayload(decodeNonce(nonce)!, opts.host ?? phone.relayHost, ts),
  );
  return {
    'X-Device-Id': phone.deviceId,
    'X-Device-Nonce': nonce,
    'X-Device-Ts': ts,
    'X-Device-Sig': sig,
    'X-Device-App': 'raw-test/1',
  };
}

export interface OpenSocket {
  ws: WebSocket;
  /** Resolves with the close code (and reason) when the relay closes the socket. */
  closed: Promise<{ code: number; reason: string }>;
  /** Frames received from the relay, parsed. */
  frames: any[];
  nextFrame(predicate?: (f: any) => boolean, timeoutMs?: number): Promise<any>;
}

export function openSocket(relayUrl: string, headers: Record<string, string>): Promise<OpenSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${relayUrl.replace(/^http/, 'ws')}/device/ws`, { headers, maxPayload: 1024 * 1024 });
    const frames: any[] = [];
    const waiters: Array<{ p: (f: any) => boolean; r: (f: any) => void }> = [];
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on('close', (code, reason) => r({ code, reason: reason.toString() })),
    );
    ws.on('message', (data) => {
      const f = JSON.parse((data as Buffer).toString());
      frames.push(f);
      for (const w of [...waiters])
        if (w.p(f)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.r(f);
        }
    });
    ws.on('open', () =>
      resolve({
        ws,
        closed,
        frames,
        nextFrame: (p = () => true, timeoutMs = 5000) =>
          new Promise((r, j) => {
            const seen = frames.find(p);
            if (seen) return r(seen);
            waiters.push({ p, r });
            setTimeout(() => j(new Error('no matching frame')), timeoutMs);
          }),
      }),
    );
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.on('error', reject);
  });
}

/** Answers the relay's initialize like a minimal MCP server with these capabilities would. */
export async function answerInitialize(
  s: OpenSocket,
  capabilities: Record<string, unknown> = { tools: {} },
): Promise<void> {
  const init = await s.nextFrame((f) => f.method === 'initialize');
  s.ws.send(
    JSON.stringify({
      jsonrpc: '2.0',
      id: init.id,
      result: { protocolVersion: init.params.protocolVersion, capabilities, serverInfo: { name: 'raw', version: '1' } },
    }),
  );
}

/** Answers the relay's initialize like a minimal MCP server would. */
export async function completeHandshake(s: OpenSocket): Promise<void> {
  await answerInitialize(s);
  await s.nextFrame((f) => f.method === 'notifications/initialized');
}

/** A tool a raw phone can advertise: `echo`, under devices:act. */
export const ECHO_TOOL = {
  name: 'echo',
  inputSchema: { type: 'object' },
  _meta: { 'phonebridge/scope': 'devices:act' },
};

/**
 * Answers the relay's initialize and tools/list like a minimal MCP server with these tools and
 * capabilities; the relay then holds the phone ready.
 */
export async function serveHandshake(
  s: OpenSocket,
  tools: unknown[] = [ECHO_TOOL],
  capabilities: Record<string, unknown> = { tools: {} },
): Promise<void> {
  await answerInitialize(s, capabilities);
  const list = await s.nextFrame((f) => f.method === 'tools/list');
  s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: list.id, result: { tools } }));
}

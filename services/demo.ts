// `npm start`: the relay on the embedded default, one simulated phone paired to it, and a
// key — everything a person needs to point an MCP client at a phone in one command.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseRelayConfig, type RelayConfig } from '../src/config.ts';
import { sha256Hex } from '../src/crypto/secrets.ts';
import { DeviceAgent, loadIdentity, stderrLogger } from '../src/device/agent/index.ts';
import { saveIdentity, type DeviceIdentity } from '../src/device/agent/state.ts';
import { onParentGone, startRelay, type RunningRelay } from './serve.ts';
import { createKey, createPairing } from '../src/provisioning.ts';
import { simServerFactory } from './device-run.ts';

interface SavedKey {
  token: string;
  /** The demo device the key was minted for (absent in files written before it was recorded). */
  device_id?: string;
}

function readSavedKey(file: string): SavedKey | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<SavedKey>;
    return typeof parsed.token === 'string' ? (parsed as SavedKey) : undefined;
  } catch {
    return undefined; // unreadable: a new key is minted and the file rewritten
  }
}

/**
 * The demo phone's identity, ready to connect to this relay. A phone whose pairing still
 * exists keeps its device (and so its keys): when the relay now listens elsewhere (another
 * --port), its state is re-pointed at the new URL, since the data dir — and so the relay the
 * phone paired with — is the same. Only a phone whose pairing is gone is paired afresh, and
 * then the previous demo device is removed with its keys, so stale demo phones never pile up.
 */
async function demoPhoneIdentity(
  relay: RunningRelay,
  config: RelayConfig,
  phoneDir: string,
  previousDeviceId: string | undefined,
): Promise<DeviceIdentity> {
  const store = relay.store.store;
  const known = loadIdentity(phoneDir);
  if (known && !known.removed_at && (await store.getDevice(known.device_id))) {
    if (known.relay === config.publicUrl && known.relay_host === config.relayHost) return known;
    const repointed: DeviceIdentity = { ...known, relay: config.publicUrl, relay_host: config.relayHost };
    if (relay.node.fingerprint) repointed.fp = relay.node.fingerprint;
    else delete repointed.fp;
    saveIdentity(phoneDir, repointed);
    return repointed;
  }
  for (const stale of new Set([known?.device_id, previousDeviceId])) {
    if (stale) await store.removeDevice(stale);
  }
  rmSync(phoneDir, { recursive: true, force: true });
  const qr = await createPairing(store, { relay: config.publicUrl, name: 'demo phone', fp: relay.node.fingerprint });
  await DeviceAgent.pair({ stateDir: phoneDir, qr, name: 'demo phone', log: stderrLogger });
  return loadIdentity(phoneDir)!;
}

export async function demo(argv: string[]): Promise<void> {
  const config = parseRelayConfig(argv);
  const relay = await startRelay(config);
  const store = relay.store.store;
  const phoneDir = join(config.dataDir, 'demo-phone');

  const keyFile = join(config.dataDir, 'demo-key.json');
  const saved = readSavedKey(keyFile);
  const savedFor =
    saved && (saved.device_id ?? (await store.findTokenByHash(sha256Hex(saved.token), new Date()))?.deviceId);
  const identity = await demoPhoneIdentity(relay, config, phoneDir, savedFor);
  const agent = new DeviceAgent({ stateDir: phoneDir, createServer: simServerFactory(phoneDir), log: stderrLogger });
  agent.start();

  // The demo key lives in the data dir (0600) so restarts print the same one — but only while
  // it still opens the phone that is connected now (docs/decisions/0090-demo-phone-follows-the-relay.md).
  let token: string | undefined;
  if (saved) {
    const found = await store.findTokenByHash(sha256Hex(saved.token), new Date());
    if (found?.deviceId === identity.device_id) token = saved.token;
  }
  if (!token) {
    token = (await createKey(store, identity.device_id)).token;
    writeFileSync(keyFile, JSON.stringify({ token, device_id: identity.device_id }), { mode: 0o600 });
  }

  const mcpUrl = `${config.publicUrl}/mcp`;
  const clientConfig = { mcpServers: { phonebridge: { type: 'http', url: mcpUrl, headers: { 'X-Api-Key': token } } } };
  console.log(`
phonebridge is running (embedded store in ${config.dataDir}, one simulated phone).

  MCP URL:  ${mcpUrl}
  API key:  ${token}
  Metrics:  http://${config.adminHost}:${relay.node.adminPort}/metrics

MCP client config (Claude Desktop, Cursor, …):
${JSON.stringify(clientConfig, null, 2)}

Ctrl-C stops it.`);
  console.log(JSON.stringify({ ready: true, url: mcpUrl, apiKey: token, deviceId: identity.device_id }));

  const shutdown = async () => {
    await agent.stop();
    await relay.node.drain();
    await relay.stop();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown());
  process.once('SIGTERM', () => void shutdown());
  onParentGone(config, () => void shutdown());
}

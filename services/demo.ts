// `npm start`: the relay on the embedded default, one simulated phone paired to it, and a
// key — everything a person needs to point an MCP client at a phone in one command.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseRelayConfig } from '../src/config.ts';
import { sha256Hex } from '../src/crypto/secrets.ts';
import { DeviceAgent, loadIdentity, stderrLogger } from '../src/device/agent/index.ts';
import { onParentGone, startRelay } from './serve.ts';
import { createKey, createPairing } from './cli.ts';
import { simServerFactory } from './device-run.ts';

export async function demo(argv: string[]): Promise<void> {
  const config = parseRelayConfig(argv);
  const relay = await startRelay(config);
  const store = relay.store.store;
  const phoneDir = join(config.dataDir, 'demo-phone');

  // Reuse the demo phone across restarts while its pairing still exists.
  const known = loadIdentity(phoneDir);
  if (!known || known.removed_at || !(await store.getDevice(known.device_id)) || known.relay !== config.publicUrl) {
    // A stale demo phone (removed, or paired with a relay on another URL): start it afresh.
    rmSync(phoneDir, { recursive: true, force: true });
    const qr = await createPairing(store, { relay: config.publicUrl, name: 'demo phone', fp: relay.node.fingerprint });
    await DeviceAgent.pair({ stateDir: phoneDir, qr, name: 'demo phone', log: stderrLogger });
  }
  const identity = loadIdentity(phoneDir)!;
  const agent = new DeviceAgent({ stateDir: phoneDir, createServer: simServerFactory(phoneDir), log: stderrLogger });
  agent.start();

  // The demo key lives in the data dir (0600) so restarts print the same one.
  const keyFile = join(config.dataDir, 'demo-key.json');
  let token: string | undefined;
  if (existsSync(keyFile)) {
    const saved = JSON.parse(readFileSync(keyFile, 'utf8')) as { token: string };
    if (await store.findTokenByHash(sha256Hex(saved.token), new Date())) token = saved.token;
  }
  if (!token) {
    token = (await createKey(store, identity.device_id)).token;
    writeFileSync(keyFile, JSON.stringify({ token }), { mode: 0o600 });
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

// `phonebridge device run`: the reference phone. Pairs once (keys kept in --state), then
// stays connected, serving the simulated phone's tool surface.
import { parseArgs } from 'node:util';
import { runDevice, loadIdentity, type McpServerLike } from '../src/device/agent/index.ts';
import { SimPhone } from '../src/device/sim/model.ts';
import { createPhoneServer } from '../src/device/tools/index.ts';

export function simServerFactory(stateDir: string, seed = 1): () => McpServerLike {
  const phone = new SimPhone({ seed });
  return () => {
    // Called per socket, after pairing, so the identity exists by then.
    const identity = loadIdentity(stateDir);
    return createPhoneServer({ phone, deviceId: identity?.device_id ?? 'unpaired' });
  };
}

export async function deviceCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== 'run') throw new Error('device: expected "run"');
  const { values } = parseArgs({
    args: rest,
    options: {
      state: { type: 'string' },
      pair: { type: 'string' },
      backend: { type: 'string', default: 'sim' },
      name: { type: 'string' },
      seed: { type: 'string' },
      'upstream-cmd': { type: 'string' },
      'upstream-url': { type: 'string' },
      'scope-map': { type: 'string' },
    },
  });
  if (!values.state) throw new Error('device run needs --state DIR');
  let createServer: () => McpServerLike;
  if (values.backend === 'sim') {
    createServer = simServerFactory(values.state, values.seed ? Number(values.seed) : 1);
  } else if (values.backend === 'bridge') {
    const { bridgeServerFactory } = await import('../src/device/bridge/index.ts');
    createServer = await bridgeServerFactory({
      upstreamCmd: values['upstream-cmd'],
      upstreamUrl: values['upstream-url'],
      scopeMap: values['scope-map'],
    });
  } else {
    throw new Error(`unknown --backend "${values.backend}"; use sim or bridge`);
  }
  const ac = new AbortController();
  process.once('SIGINT', () => ac.abort());
  process.once('SIGTERM', () => ac.abort());
  const stop = await runDevice({
    stateDir: values.state,
    pair: values.pair,
    name: values.name,
    createServer,
    signal: ac.signal,
  });
  console.error(`phonebridge device: stopped (${stop.reason}): ${stop.message}`);
  process.exit(stop.reason === 'stopped' ? 0 : 3);
}

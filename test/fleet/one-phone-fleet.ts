// The set-up of fleet API tests that check one rule on one phone: two real nodes over Redis and
// Postgres, one phone paired on the first with the given labels, and an account-wide fleet key;
// and the API called as a client calls it.
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { pairRaw } from '../helpers/raw-device.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

export async function api(base: string, token: string, method: string, path: string, body?: unknown) {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : undefined };
}

export interface OnePhoneFleet {
  nodes: TwoNodes;
  phoneId: string;
  /** A fleet key of the whole account, every scope. */
  admin: { id: string; token: string };
}

export async function onePhoneFleet(name: string, labels: Record<string, string>): Promise<OnePhoneFleet> {
  const nodes = await startTwoNodes();
  const store = nodes.a.relay.store.store;
  const qr = await nodes.a.pair(name);
  const phoneId = (await pairRaw(nodes.a.url, qr.code)).deviceId;
  await store.fleet.updateLabels(phoneId, { set: labels, remove: [] });
  const admin = await createFleetKey(store, { accountId: 'local', scopes: [...SCOPES] });
  return { nodes, phoneId, admin };
}

// PATCH /api/v1/devices/{id}: a label key that is not valid label syntax is a clear 400
// bad_label, whether it is being set or removed (null), as the CLI refuses it
// (src/fleet/labels.ts parseLabelArgs): a typo in a removal is not a silent no-op.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onePhoneFleet } from './one-phone-fleet.ts';
import type { TwoNodes } from '../helpers/two-nodes.ts';
import { parseLabelArgs } from '../../src/fleet/labels.ts';

let nodes: TwoNodes;
let phoneId: string;
let admin: { id: string; token: string };

beforeAll(async () => {
  ({ nodes, phoneId, admin } = await onePhoneFleet('p', { site: 'berlin' }));
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
});

describe('removing a label whose key is not valid label syntax', () => {
  it('is 400 bad_label, as setting it is (and as the CLI refuses it), and changes nothing', async () => {
    expect(() => parseLabelArgs(['site tag!-'])).toThrow(/label key/);
    const set = await api(nodes.a.url, admin.token, 'PATCH', `/api/v1/devices/${phoneId}`, {
      labels: { 'site tag!': 'x' },
    });
    expect(set.json.error).toBe('bad_label');
    const removal = await api(nodes.a.url, admin.token, 'PATCH', `/api/v1/devices/${phoneId}`, {
      labels: { 'site tag!': null, site: null },
    });
    expect({ status: removal.status, error: removal.json?.error }).toEqual({ status: 400, error: 'bad_label' });
    const d = await api(nodes.a.url, admin.token, 'GET', `/api/v1/devices/${phoneId}`);
    expect(d.json.labels).toEqual({ site: 'berlin' });
  });
});

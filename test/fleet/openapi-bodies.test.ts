// The /api/v1 OpenAPI document says of each request body what the server does with it
// (src/fleet/api/server.ts, route.ts): a body is required only where an absent one (read as {})
// is refused — renewing an allocation takes none — and every operation with a body lists the
// 413 too_large the server answers past its limit. Checked against the document served by a
// real node and against what the nodes answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { api, onePhoneFleet } from './one-phone-fleet.ts';
import type { TwoNodes } from '../helpers/two-nodes.ts';
import { ROUTES } from '../../src/fleet/api/routes.ts';

interface Operation {
  operationId: string;
  requestBody?: { required: boolean };
  responses: Record<string, { description: string; content?: Record<string, { schema: unknown }> }>;
}

let nodes: TwoNodes;
let admin: { id: string; token: string };
let doc: { paths: Record<string, Record<string, Operation>> };

beforeAll(async () => {
  ({ nodes, admin } = await onePhoneFleet('desk-1', { site: 'desk' }));
  doc = (await (await fetch(`${nodes.b.url}/api/v1/openapi.json`)).json()) as typeof doc;
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
});

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

describe('request bodies in the OpenAPI document', () => {
  it('marks a body required only where the server refuses an absent one', async () => {
    const required = Object.fromEntries(
      operations()
        .filter(({ op }) => op.requestBody)
        .map(({ op }) => [op.operationId, op.requestBody!.required]),
    );
    expect(required).toEqual({
      labelDevice: true,
      allocate: true,
      renewAllocation: false,
      createDeviceKey: true,
      createEnrollment: true,
    });
    // What the server does: renewing without a body keeps the allocation's term...
    const a = await api(nodes.b.url, admin.token, 'POST', '/api/v1/allocations', { ttl_s: 60, include_offline: true });
    expect(a.status).toBe(201);
    const renewed = await api(nodes.b.url, admin.token, 'POST', `/api/v1/allocations/${a.json.id}/renew`);
    expect(renewed.status).toBe(200);
    expect(Date.parse(renewed.json.expires_at)).toBeGreaterThanOrEqual(Date.parse(a.json.expires_at));
    // ...and allocating without one is a 400 naming the missing field.
    const none = await api(nodes.b.url, admin.token, 'POST', '/api/v1/allocations');
    expect(none.status).toBe(400);
    expect(none.json).toMatchObject({ error: 'bad_request', message: expect.stringContaining('body.ttl_s') });
    expect((await api(nodes.b.url, admin.token, 'DELETE', `/api/v1/allocations/${a.json.id}`)).status).toBe(204);
  });

  it('lists 413 too_large on every operation with a body, and the server answers it there', async () => {
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    for (const { path, method, op } of operations()) {
      const listed = op.responses['413'];
      if (!op.requestBody) {
        expect(listed, `${method} ${path}`).toBeUndefined();
        continue;
      }
      expect(listed?.description, `${method} ${path}`).toBe('too_large: the body exceeds 65536 bytes');
      expect(listed?.content?.['application/json']?.schema).toEqual({ $ref: '#/components/schemas/Error' });
    }
    const withBody = ROUTES.filter((r) => r.body);
    expect(withBody.length).toBe(5);
    const big = JSON.stringify({ pad: 'x'.repeat(70_000) });
    for (const r of withBody) {
      const url = `${nodes.b.url}${r.path.replace('{id}', 'x')}`;
      const res = await fetch(url, {
        method: r.method.toUpperCase(),
        headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
        body: big,
      });
      expect(res.status, r.operationId).toBe(413);
      expect(await res.json()).toEqual({ error: 'too_large', message: 'request body exceeds 65536 bytes' });
    }
  });
});

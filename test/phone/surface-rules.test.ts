// The reference phone's tool surface against the rules of its MCP surface (docs/TOOLS.md): every
// error code that can reach a caller is documented (a task cancelled through tasks/cancel
// included); inputs are strict, so an own "__proto__" key, which the SDK's request parse would
// drop, is refused like any unknown key, and arguments that are no object get the
// invalid_arguments envelope rather than a JSON-RPC internal error (envelopeSdkErrors in
// src/device/tools/server.ts); a change of meaning since launch carries an @since note and a
// changelog entry. The official SDK client over the phone's real McpServer
// (src/device/tools/in-memory.ts sets the caller meta the relay would).
import { readFileSync } from 'node:fs';
import { ResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { SimPhone } from '../../src/device/sim/model.ts';
import { CALLER_META_KEY, LAUNCH_VERSION, SURFACE_CHANGES, type Caller } from '../../src/device/tools/contract.ts';
import { callerOf, connect } from '../../src/device/tools/in-memory.ts';

const ALL: Caller['scopes'] = ['devices:read', 'devices:act', 'devices:lease', 'runs:start'];

/** The error codes docs/TOOLS.md documents ("## Error codes" table). */
function documentedCodes(): string[] {
  const doc = readFileSync(new URL('../../docs/TOOLS.md', import.meta.url), 'utf8');
  const table = doc.split('## Error codes')[1].split('\n## ')[0];
  return [...table.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
}

function envelope(result: CallToolResult): { code: string; message: string } {
  expect(result.isError).toBe(true);
  expect(result.structuredContent).toBeUndefined();
  const block = result.content[0];
  expect(block?.type).toBe('text');
  return (JSON.parse((block as { text: string }).text) as { error: { code: string; message: string } }).error;
}

async function setup() {
  const phone = new SimPhone({ seed: 5 });
  const client = await connect({ phone, deviceId: 'phone-1', runStepDelayMs: 5 });
  const rq = (method: string, params: Record<string, unknown>, caller: Caller = { credential: 'alice', scopes: ALL }) =>
    client.request({ method, params: { ...params, _meta: { [CALLER_META_KEY]: caller } } }, ResultSchema) as Promise<
      Record<string, any>
    >;
  return { phone, client, rq };
}

describe('error codes that reach a caller are the documented ones (docs/TOOLS.md "Error codes")', () => {
  it('control: a task whose tool was refused delivers a documented code through tasks/result', async () => {
    const { rq, client } = await setup();
    const created = await rq('tools/call', {
      name: 'wait_for_events',
      arguments: { timeout_s: 0, leaseId: 'stale' },
      task: {},
    });
    const result = (await rq('tasks/result', { taskId: created.task.taskId })) as CallToolResult;
    expect(envelope(result).code).toBe('lease_mismatch');
    expect(documentedCodes()).toContain('lease_mismatch');
    await client.close();
  });

  it('a task-augmented tools/call cancelled by its client delivers a documented error code through tasks/result', async () => {
    const { rq, client } = await setup();
    const created = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 30 }, task: {} });
    await rq('tasks/cancel', { taskId: created.task.taskId });
    const result = (await rq('tasks/result', { taskId: created.task.taskId })) as CallToolResult;
    const { code } = envelope(result);
    // The phone answers {"error":{"code":"cancelled",…}}: a code docs/TOOLS.md does not list.
    expect(documentedCodes()).toContain(code);
    await client.close();
  });
});

describe('inputs are strict: unknown keys are refused, not stripped', () => {
  it('control: an unknown key "leaseid" is refused with invalid_arguments and nothing happens', async () => {
    const { phone, client } = await setup();
    const call = callerOf(client, { credential: 'alice', scopes: ALL });
    const result = await call('open_app', { packageName: 'com.phonebridge.notes', leaseid: 'lease-1' });
    expect(envelope(result).code).toBe('invalid_arguments');
    expect(phone.foregroundApp).toBe('com.android.launcher');
    await client.close();
  });

  it('an unknown key named "__proto__" is refused with invalid_arguments and nothing happens', async () => {
    const { phone, client } = await setup();
    const call = callerOf(client, { credential: 'alice', scopes: ALL });
    // What JSON.parse makes of {"packageName":…,"__proto__":{"leaseid":"lease-1"}}: an own key "__proto__".
    const args = JSON.parse('{"packageName":"com.phonebridge.notes","__proto__":{"leaseid":"lease-1"}}') as Record<
      string,
      unknown
    >;
    expect(Object.keys(args)).toEqual(['packageName', '__proto__']);
    const result = await call('open_app', args);
    expect(result.isError, JSON.stringify(result.content)).toBe(true);
    expect(envelope(result).code).toBe('invalid_arguments');
    expect(phone.foregroundApp).toBe('com.android.launcher');
    await client.close();
  });

  it('malformed arguments (null, an array) are refused with the invalid_arguments envelope, not a JSON-RPC internal error', async () => {
    const { rq, client } = await setup();
    for (const bad of [null, [1, 2], 'x']) {
      const answer = await rq('tools/call', { name: 'list_devices', arguments: bad }).then(
        (r) => r,
        (e: unknown) => ({ thrown: String(e) }),
      );
      expect(answer, JSON.stringify(bad)).not.toHaveProperty('thrown');
      expect(envelope(answer as CallToolResult).code, JSON.stringify(bad)).toBe('invalid_arguments');
    }
    await client.close();
  });
});

describe('the surface is a frozen contract', () => {
  // Descriptions as the launch surface (2026.09.25) published them: git show 3380b0e:docs/TOOLS.md.
  const LAUNCH_TYPE_TEXT =
    'Types text into the focused text field, or into elementId after focusing it. Accepts leaseId and an idempotencyKey (a retry with the same key replays the outcome).';

  it('a change of meaning since launch (type_text now drops text past 5000 UTF-16 units) carries an @since note and a changelog entry', async () => {
    const { client } = await setup();
    const { tools } = await client.listTools();
    const description = tools.find((t) => t.name === 'type_text')!.description!;
    const body = description.replace(/\s*@since \d{4}\.\d{2}\.\d{2}$/, '');
    expect(body).not.toBe(LAUNCH_TYPE_TEXT); // its meaning changed: a full field now drops the rest
    const declared = [...description.matchAll(/@since (\d{4}\.\d{2}\.\d{2})/g)].map((m) => m[1]);
    expect(
      declared.filter((v) => v > LAUNCH_VERSION),
      description,
    ).not.toEqual([]);
    expect(SURFACE_CHANGES.filter((c) => c.change.includes('type_text'))).not.toEqual([]);
    await client.close();
  });
});

// The bridge in front of a real third-party MCP server (@modelcontextprotocol/server-everything
// over stdio), driven in memory by the official SDK client.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { silentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, type BridgeServerFactory } from '../../src/device/bridge/index.ts';
import { connectToBridge, everythingCommand, waitFor } from './connect.ts';

let factory: BridgeServerFactory;
let client: Client;

beforeAll(async () => {
  const scopeMap = join(mkdtempSync(join(tmpdir(), 'bridge-')), 'scopes.json');
  writeFileSync(scopeMap, JSON.stringify({ 'get-sum': 'runs:start' }));
  factory = await bridgeServerFactory({
    upstreamCmd: everythingCommand(),
    scopeMap,
    log: silentLogger,
    backoff: { baseMs: 50, dropWindowMs: 50 },
  });
  client = await connectToBridge(factory);
});
afterAll(async () => {
  await client?.close();
  await factory?.close();
});

const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;
const scopeOf = (tools: { name: string; _meta?: Record<string, unknown> }[], name: string) =>
  tools.find((t) => t.name === name)?._meta?.['phonebridge/scope'];

describe('bridge to server-everything over stdio', () => {
  it("answers initialize with the upstream's server info, instructions and proxied capabilities", () => {
    expect(client.getServerVersion()).toMatchObject({ name: 'mcp-servers/everything', version: '2.0.0' });
    expect(client.getInstructions()).toBeTruthy();
    const capabilities = client.getServerCapabilities()!;
    expect(capabilities).toMatchObject({
      tools: { listChanged: true },
      resources: { subscribe: true },
      prompts: {},
      logging: {},
      completions: {},
    });
    // Passed through with its methods (test/bridge/tasks.test.ts).
    expect(capabilities.tasks).toMatchObject({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
  });

  it('lists every tool with a scope: readOnlyHint → devices:read, else devices:act, the scope map overriding', async () => {
    const { tools, nextCursor } = await client.listTools();
    expect(nextCursor).toBeUndefined();
    expect(tools.length).toBeGreaterThan(5);
    for (const tool of tools)
      expect(tool._meta?.['phonebridge/scope'], tool.name).toMatch(/^(devices:read|devices:act|runs:start)$/);
    expect(tools.find((t) => t.name === 'echo')?.annotations?.readOnlyHint).toBe(true);
    expect(scopeOf(tools, 'echo')).toBe('devices:read');
    expect(tools.find((t) => t.name === 'toggle-simulated-logging')?.annotations?.readOnlyHint).toBe(false);
    expect(scopeOf(tools, 'toggle-simulated-logging')).toBe('devices:act');
    expect(tools.find((t) => t.name === 'get-sum')?.annotations?.readOnlyHint).toBe(true);
    expect(scopeOf(tools, 'get-sum')).toBe('runs:start');
  });

  it('calls a tool and passes upstream errors through', async () => {
    expect(text(await client.callTool({ name: 'echo', arguments: { message: 'hello phone' } }))).toBe(
      'Echo: hello phone',
    );
    expect(text(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } }))).toContain('5');
    const bad = await client.callTool({ name: 'no-such-tool', arguments: {} });
    expect(bad.isError).toBe(true);
  });

  it('relays progress of a long-running tool under the caller’s token', async () => {
    const seen: Progress[] = [];
    const result = await client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 0.8, steps: 4 } },
      undefined,
      { onprogress: (p) => seen.push(p) },
    );
    expect(text(result)).toContain('Long running operation completed');
    expect(seen.map((p) => [p.progress, p.total])).toEqual([
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
  });

  it('lists and reads resources and templates', async () => {
    const { resources } = await client.listResources();
    expect(resources.length).toBeGreaterThan(0);
    const read = await client.readResource({ uri: resources[0].uri });
    expect(read.contents[0].uri).toBe(resources[0].uri);
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toContain('demo://resource/dynamic/text/{resourceId}');
  });

  it('lists and gets prompts, and completes arguments', async () => {
    const { prompts } = await client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(expect.arrayContaining(['simple-prompt', 'args-prompt']));
    const prompt = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Lisbon' } });
    expect(prompt.messages[0].content).toMatchObject({ type: 'text', text: "What's weather in Lisbon?" });
    const completion = await client.complete({
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'department', value: 'Eng' },
    });
    expect(completion.completion.values).toEqual(['Engineering']);
  });

  it('forwards logging/setLevel and relays log messages', async () => {
    const messages: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void messages.push(n.params));
    await client.setLoggingLevel('debug');
    await client.callTool({ name: 'toggle-simulated-logging', arguments: {} }); // sends one at once
    await waitFor(() => messages.length > 0);
    await client.callTool({ name: 'toggle-simulated-logging', arguments: {} }); // and off again
    expect(messages[0]).toMatchObject({ level: expect.any(String), data: expect.any(String) });
  });

  it('subscribes to a resource and relays resources/updated', async () => {
    const updated: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
    const uri = (await client.listResources()).resources[0].uri;
    await client.subscribeResource({ uri });
    await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }); // sends one at once
    await waitFor(() => updated.includes(uri));
    await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    await client.unsubscribeResource({ uri });
  });

  // Last: it kills the upstream.
  it('fails calls clearly while the upstream is down, restarts it, and tells the relay to refresh its lists', async () => {
    let listChanged = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void listChanged++);
    const pid = factory.upstream.pid!;
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !factory.upstream.connected);

    const down = await client.callTool({ name: 'echo', arguments: { message: 'anyone?' } });
    expect(down.isError).toBe(true);
    expect(JSON.parse(text(down))).toMatchObject({
      error: { code: 'upstream_unavailable', message: expect.stringContaining('is unavailable') },
    });
    await expect(client.listPrompts()).rejects.toThrow(/is unavailable/);

    await waitFor(() => factory.upstream.connected, 10_000);
    expect(factory.upstream.pid).not.toBe(pid);
    await waitFor(() => listChanged > 0);
    expect(text(await client.callTool({ name: 'echo', arguments: { message: 'back' } }))).toBe('Echo: back');
  });
});

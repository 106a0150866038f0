import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { z } from 'zod';
import { MAX_FRAME_BYTES, TOO_LARGE_RPC_CODE, WebSocketTransport } from './ws-transport.ts';

// The peer plays the relay: it writes raw frames and records every frame it gets, with its size.
let wss: WebSocketServer;
let peer: WebSocket;
let frames: { bytes: number; message: any }[];
let device: WebSocket;
let transport: WebSocketTransport;
let errors: Error[];
let warnings: string[];

function serveTestTools(): McpServer {
  const server = new McpServer({ name: 'test-phone', version: '0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool('huge', { inputSchema: { bytes: z.number() } }, ({ bytes }) => ({
    content: [{ type: 'text', text: 'x'.repeat(bytes) }],
  }));
  server.registerResource('big-file', 'file:///big', {}, () => ({
    contents: [{ uri: 'file:///big', text: 'y'.repeat(MAX_FRAME_BYTES) }],
  }));
  return server;
}

/** Sends a raw frame and waits for the response carrying `id`. */
async function call(id: number, method: string, params: object = {}): Promise<{ bytes: number; message: any }> {
  peer.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  for (const until = Date.now() + 5_000; Date.now() < until;) {
    const hit = frames.find((f) => f.message.id === id);
    if (hit) return hit;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`no response to ${method} (id ${id}) within 5 s`);
}

async function initialize(): Promise<void> {
  const reply = await call(0, 'initialize', {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'peer', version: '0' },
  });
  expect(reply.message.result.serverInfo.name).toBe('test-phone');
  peer.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
}

beforeEach(async () => {
  frames = [];
  errors = [];
  warnings = [];
  wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.once('listening', r));
  const accepted = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  device = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
  transport = new WebSocketTransport(device, { log: { warn: (m) => warnings.push(m) } });
  await new Promise((r) => device.once('open', r));
  peer = await accepted;
  peer.on('message', (data: Buffer) => frames.push({ bytes: data.length, message: JSON.parse(data.toString('utf8')) }));
});

afterEach(async () => {
  device.terminate();
  await new Promise((r) => wss.close(r));
});

describe('WebSocketTransport', () => {
  it('delivers frames that arrive before start(), in order', async () => {
    peer.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/one' }));
    peer.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/two' }));
    await new Promise((r) => setTimeout(r, 50));
    const got: string[] = [];
    transport.onmessage = (m) => got.push((m as { method: string }).method);
    await transport.start();
    expect(got).toEqual(['notifications/one', 'notifications/two']);
  });

  it('drops a malformed frame, reports it, and keeps the socket up', async () => {
    await serveTestTools().connect(transport);
    transport.onerror = (e) => errors.push(e);
    peer.send('{not json');
    peer.send(JSON.stringify([{ jsonrpc: '2.0', id: 9, method: 'ping' }])); // batches are not allowed
    peer.send(Buffer.from('{}'), { binary: true });
    await initialize();
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/^dropped a malformed frame/),
      expect.stringMatching(/^dropped a malformed frame/),
      expect.stringMatching(/^dropped a binary frame/),
    ]);
    expect(device.readyState).toBe(WebSocket.OPEN);
    const echo = await call(1, 'tools/call', { name: 'echo', arguments: { text: 'still here' } });
    expect(echo.message.result.content[0].text).toBe('still here');
  });

  it('turns an oversized tools/call result into a too_large tool error that fits a frame', async () => {
    await serveTestTools().connect(transport);
    await initialize();
    const fits = await call(1, 'tools/call', { name: 'huge', arguments: { bytes: 200_000 } });
    expect(fits.message.result.content[0].text).toHaveLength(200_000);

    const reply = await call(2, 'tools/call', { name: 'huge', arguments: { bytes: 300_000 } });
    expect(reply.bytes).toBeLessThan(MAX_FRAME_BYTES);
    expect(reply.message.result.isError).toBe(true);
    expect(reply.message.result.structuredContent).toBeUndefined();
    const envelope = JSON.parse(reply.message.result.content[0].text);
    expect(envelope.error).toMatchObject({ code: 'too_large', limit: MAX_FRAME_BYTES });
    expect(envelope.error.message).toMatch(/frame limit/);
    expect(Math.max(...frames.map((f) => f.bytes))).toBeLessThanOrEqual(MAX_FRAME_BYTES);
    expect(device.readyState).toBe(WebSocket.OPEN);
  });

  it('answers other oversized responses with a JSON-RPC too_large error', async () => {
    await serveTestTools().connect(transport);
    await initialize();
    const reply = await call(3, 'resources/read', { uri: 'file:///big' });
    expect(reply.message.error).toMatchObject({ code: TOO_LARGE_RPC_CODE, data: { code: 'too_large' } });
    expect(reply.bytes).toBeLessThan(1000);
  });

  it('drops an oversized notification with a log line and refuses an oversized request', async () => {
    await transport.start();
    await transport.send({
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { level: 'info', data: 'z'.repeat(MAX_FRAME_BYTES) },
    });
    await expect(
      transport.send({
        jsonrpc: '2.0',
        id: 7,
        method: 'sampling/createMessage',
        params: { blob: 'z'.repeat(MAX_FRAME_BYTES) },
      }),
    ).rejects.toThrow(/frame limit; not sent/);
    await transport.send({ jsonrpc: '2.0', method: 'notifications/small' });
    await new Promise((r) => setTimeout(r, 50));
    expect(frames.map((f) => f.message.method)).toEqual(['notifications/small']);
    expect(warnings).toEqual([expect.stringMatching(/^dropped notification notifications\/message: \d+ bytes/)]);
  });

  it('reports close once, whether the peer closed or close() was called', async () => {
    let closes = 0;
    transport.onclose = () => closes++;
    await transport.start();
    await transport.close();
    await new Promise((r) => device.once('close', r));
    expect(closes).toBe(1);
    await expect(transport.send({ jsonrpc: '2.0', method: 'x' })).rejects.toThrow(/not open/);
  });
});

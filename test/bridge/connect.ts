// Drives a bridge server the way the relay would, but in memory, with the official SDK client.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll } from 'vitest';
import { silentLogger, type AgentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, type BridgeOptions, type BridgeServerFactory } from '../../src/device/bridge/index.ts';

export async function connectToBridge(factory: BridgeServerFactory): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await factory().connect(serverSide);
  const client = new Client({ name: 'bridge-test', version: '1.0.0' });
  await client.connect(clientSide);
  return client;
}

/** `node <bin> stdio` for @modelcontextprotocol/server-everything, found through its package.json. */
export function everythingCommand(): string {
  const pkgUrl = new URL('../../node_modules/@modelcontextprotocol/server-everything/package.json', import.meta.url);
  const pkg = JSON.parse(readFileSync(pkgUrl, 'utf8')) as { bin: Record<string, string> };
  const bin = fileURLToPath(new URL(pkg.bin['mcp-server-everything'], pkgUrl));
  return `node '${bin}' stdio`;
}

export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const TSX = fileURLToPath(new URL('../../node_modules/tsx/dist/cli.mjs', import.meta.url));

/** The upstream command that runs a TypeScript MCP server script over stdio. */
export const tsxCommand = (script: string) => `'${process.execPath}' '${TSX}' '${script}'`;

export interface BridgeUnderTest {
  factory: BridgeServerFactory;
  client: Client;
}

/**
 * A bridge over `upstreamCmd` with one SDK client connected, for the calling test file: started in
 * its beforeAll, closed in its afterAll. Read the fields inside tests, once beforeAll has run.
 */
export function useBridge(
  upstreamCmd: string,
  log: AgentLogger = silentLogger,
  options: Omit<BridgeOptions, 'upstreamCmd' | 'log'> = {},
): BridgeUnderTest {
  const b = {} as BridgeUnderTest;
  beforeAll(async () => {
    b.factory = await bridgeServerFactory({ ...options, upstreamCmd, log });
    b.client = await connectToBridge(b.factory);
  }, 60_000);
  afterAll(async () => {
    await b.client?.close();
    await b.factory?.close();
  });
  return b;
}

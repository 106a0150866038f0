// In-memory connections for tests and the docs generator: an official SDK client over
// InMemoryTransport, with the relay's caller meta injected per call
// (docs/decisions/0006-caller-context.md).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { CALLER_META_KEY, type Caller } from './contract.ts';
import { createPhoneServer, type PhoneServerOptions } from './server.ts';

export async function connect(opts: PhoneServerOptions): Promise<Client> {
  const server = createPhoneServer(opts);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test', version: '0' });
  await client.connect(clientSide);
  await client.listTools(); // the client validates structuredContent only for tools it has listed
  return client;
}

/** A function that calls tools as `caller` (or as the local owner when caller is undefined). */
export function callerOf(client: Client, caller?: Caller) {
  return async (name: string, args: Record<string, unknown> = {}, options?: RequestOptions): Promise<CallToolResult> =>
    (await client.callTool(
      { name, arguments: args, ...(caller ? { _meta: { [CALLER_META_KEY]: caller } } : {}) },
      undefined,
      options,
    )) as CallToolResult;
}

/** The structured result of a success; fails loudly on an error result. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read the structured result they asserted on
export function ok<T = Record<string, any>>(result: CallToolResult): T {
  if (result.isError) throw new Error(`expected success, got ${JSON.stringify(result.content)}`);
  return result.structuredContent as T;
}

/** The error envelope of an error result; checks it has no structuredContent. */
export function err(result: CallToolResult): { code: string; message: string; [k: string]: unknown } {
  if (!result.isError) throw new Error(`expected an error, got ${JSON.stringify(result.structuredContent)}`);
  if (result.structuredContent !== undefined) throw new Error('an error result carried structuredContent');
  const block = result.content[0];
  if (block?.type !== 'text') throw new Error('an error result without a text block');
  return (JSON.parse(block.text) as { error: ReturnType<typeof err> }).error;
}

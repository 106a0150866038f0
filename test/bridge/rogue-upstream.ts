// A misbehaving stdio MCP server, raw JSON-RPC on stdin/stdout (no SDK, so it can break the
// protocol): each tool is one failure an operator's upstream can show the bridge. Run:
//   npx tsx test/bridge/rogue-upstream.ts [exit-at-start | bad-list | bad-tool | huge-list | bad-init PIDFILE | silent-init PIDFILE]
// Every payload carries SECRET (test/bridge/rogue-upstream.test.ts knows it), so a test can check that no log line repeats message content.
// `cancelled-seen` answers with the ids of the notifications/cancelled it received.
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const SECRET = 'sk-rogue-0123456789';
const mode = process.argv[2] ?? 'normal';
if (mode === 'exit-at-start') process.exit(7);
if (mode === 'bad-init' || mode === 'silent-init') {
  // An initialize answer the client must refuse (or none at all), from a server that outlives its stdin.
  writeFileSync(process.argv[3], String(process.pid));
  setInterval(() => {}, 60_000);
}

type Message = { jsonrpc: '2.0'; id?: number | string; method?: string; params?: any; result?: any; error?: any };
const write = (message: object): void => void process.stdout.write(JSON.stringify(message) + '\n');
const text = (t: string) => ({ content: [{ type: 'text', text: t }] });
const cancelled: unknown[] = [];
let serverRequests = 0;
const awaiting = new Map<number, (answer: Message) => void>();

const TOOLS = [
  'crash',
  'garbage',
  'garbage-flood',
  'partial-line',
  'run-together',
  'run-into-log',
  'stray-id',
  'twice',
  'huge',
  'hang',
  'sample',
  'flood',
  'cancelled-seen',
];

function toolsList(): object {
  if (mode === 'bad-list') return { tools: SECRET };
  const tools: object[] = TOOLS.map((name) => ({ name, inputSchema: { type: 'object' } }));
  if (mode === 'bad-tool') tools.push({ name: 42, inputSchema: SECRET });
  if (mode === 'huge-list')
    for (let i = 0; i < 3000; i++)
      tools.push({ name: `filler_${i}`, description: 'x'.repeat(100), inputSchema: { type: 'object' } });
  return { tools };
}

async function call(id: Message['id'], name: string): Promise<void> {
  switch (name) {
    case 'crash':
      process.exit(3); // mid-request: the call never gets an answer
      break;
    case 'garbage':
      process.stdout.write(`this is not JSON ${SECRET}\n`);
      process.stdout.write(
        `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"},"x":"${SECRET}"\n`,
      );
      return write({ jsonrpc: '2.0', id, result: text('after garbage') });
    case 'garbage-flood':
      for (let i = 0; i < 1000; i++) process.stdout.write(`log line ${i} ${SECRET}\n`);
      return write({ jsonrpc: '2.0', id, result: text('after 1000 lines') });
    case 'partial-line':
      process.stdout.write(
        `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"${SECRET}`,
      );
      return; // and no newline, ever
    case 'run-together': // the answer without its newline, then a notification on the same line
      process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, result: text(SECRET) }));
      return write({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: SECRET } });
    case 'run-into-log': // the answer without its newline, then a log line
      process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, result: text(SECRET) }));
      return void process.stdout.write(`listening ${SECRET}\n`);
    case 'stray-id':
      write({ jsonrpc: '2.0', id: 987654, result: text(`stray ${SECRET}`) });
      return write({ jsonrpc: '2.0', id, result: text('after stray') });
    case 'twice':
      write({ jsonrpc: '2.0', id, result: text('first') });
      return write({ jsonrpc: '2.0', id, result: text(`second ${SECRET}`) });
    case 'huge':
      return write({ jsonrpc: '2.0', id, result: text('y'.repeat(300 * 1024)) });
    case 'hang':
      return;
    case 'sample': {
      const requestId = ++serverRequests;
      const answer = new Promise<Message>((resolve) => awaiting.set(requestId, resolve));
      write({
        jsonrpc: '2.0',
        id: requestId,
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: SECRET } }], maxTokens: 5 },
      });
      const { error } = await answer;
      return write({ jsonrpc: '2.0', id, result: text(`sampling refused: ${error?.code} ${error?.message}`) });
    }
    case 'flood':
      for (let i = 0; i < 5000; i++)
        write({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `${i} ${SECRET}` } });
      return write({ jsonrpc: '2.0', id, result: text('flooded') });
    case 'cancelled-seen':
      return write({ jsonrpc: '2.0', id, result: text(JSON.stringify(cancelled)) });
    default:
      return write({ jsonrpc: '2.0', id, error: { code: -32602, message: `unknown tool ${name}` } });
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  const message = JSON.parse(line) as Message;
  if (message.method === undefined) {
    awaiting.get(message.id as number)?.(message);
    continue;
  }
  switch (message.method) {
    case 'initialize':
      if (mode === 'silent-init') break;
      write({
        jsonrpc: '2.0',
        id: message.id,
        result: {
          protocolVersion: mode === 'bad-init' ? '1999-01-01' : message.params.protocolVersion,
          capabilities: { tools: {}, logging: {} },
          serverInfo: { name: 'rogue-upstream', version: '6.6.6' },
        },
      });
      break;
    case 'tools/list':
      write({ jsonrpc: '2.0', id: message.id, result: toolsList() });
      break;
    case 'tools/call':
      void call(message.id, message.params.name);
      break;
    case 'notifications/cancelled':
      cancelled.push(message.params.requestId);
      break;
    default:
      if (message.id !== undefined) write({ jsonrpc: '2.0', id: message.id, result: {} });
  }
}

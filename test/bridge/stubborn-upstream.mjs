// A stdio MCP server for the `device run` stop test (device-run-stop.test.ts), written without the SDK so it does exactly this:
// - writes its pid to the file named by argv[2];
// - answers initialize (tools capability), tools/list (one tool `ok`), tools/call `ok`, ping;
// - after initialize, writes NOISE (argv[3], default 0) non-JSON lines to stdout (a server logging to stdout);
// - ignores the end of its stdin and SIGHUP (a server that does not notice its client went away),
//   but dies on SIGTERM as any process does by default.
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { createInterface } from 'node:readline';
import { setInterval } from 'node:timers';

writeFileSync(process.argv[2], String(process.pid));
const noise = Number(process.argv[3] ?? 0);
process.on('SIGHUP', () => {});
process.stdout.on('error', () => {}); // the reader may be gone
setInterval(() => {}, 1_000); // keeps running after stdin ends

const write = (m) => process.stdout.write(JSON.stringify(m) + '\n');
createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.method === 'initialize') {
    write({
      jsonrpc: '2.0',
      id: m.id,
      result: {
        protocolVersion: m.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: 'stubborn', version: '1.0.0' },
      },
    });
  } else if (m.method === 'notifications/initialized') {
    for (let i = 0; i < noise; i++) process.stdout.write(`log line ${i}: not JSON\n`);
  } else if (m.method === 'tools/list') {
    write({
      jsonrpc: '2.0',
      id: m.id,
      result: {
        tools: [
          {
            name: 'ok',
            inputSchema: { type: 'object' },
            annotations: { readOnlyHint: true },
          },
        ],
      },
    });
  } else if (m.method === 'tools/call') {
    write({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'ok' }] } });
  } else if (m.id !== undefined && m.method !== undefined) {
    write({ jsonrpc: '2.0', id: m.id, result: {} });
  }
});

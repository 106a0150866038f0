// An upstream MCP server with tasks, as the SDK builds one (its own task store, keyed by the
// one session it has: the bridge's), over stdio. `slow-echo` answers after `ms` milliseconds,
// as a task or plainly. Run: npx tsx test/bridge/task-upstream.ts
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import * as z from 'zod';

const server = new McpServer(
  { name: 'task-upstream', version: '1.0.0' },
  {
    capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
    taskStore: new InMemoryTaskStore(),
  },
);

server.experimental.tasks.registerToolTask(
  'slow-echo',
  {
    description: 'Echoes text after ms milliseconds.',
    inputSchema: { text: z.string(), ms: z.number().int().min(0).max(60_000) },
    annotations: { readOnlyHint: true },
    execution: { taskSupport: 'optional' },
  },
  {
    async createTask({ text, ms }, extra) {
      const task = await extra.taskStore.createTask({ ttl: 60_000, pollInterval: 100 });
      setTimeout(() => {
        void extra.taskStore
          .storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `echo: ${text}` }] })
          .catch(() => {}); // cancelled meanwhile
      }, ms);
      return { task };
    },
    getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) =>
      (await extra.taskStore.getTaskResult(extra.taskId)) as { content: Array<{ type: 'text'; text: string }> },
  },
);

await server.connect(new StdioServerTransport());

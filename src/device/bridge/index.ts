// Bridge backend (`device run --backend bridge`): serves an existing MCP server
// through the relay as if it were the phone's own. One upstream connection is shared; each relay
// socket gets a low-level SDK Server that forwards to it and relays its notifications back.
//
// Proxied: initialize (the upstream's serverInfo, instructions and capabilities), tools/list (all
// upstream pages merged, each tool scoped, an invalid entry dropped, served again in pages that fit a frame), tools/call (with _meta, progress and cancellation),
// resources/list, resources/templates/list, resources/read, resources/subscribe/unsubscribe,
// prompts/list, prompts/get, completion/complete, logging/setLevel; and the notifications
// message, resources/updated, and tools/prompts/resources list_changed.
// Refused: requests from the upstream to its client (sampling/createMessage, elicitation/create,
// roots/list) get -32601 from the bridge, because the relay never forwards phone-originated
// requests to MCP clients. Upstream `tasks` are passed through (task-augmented tools/call,
// tasks/get, tasks/result, tasks/list, tasks/cancel), each task kept to the credential that
// created it (task-owners.ts); so is the 2026-07-28 tasks extension (SEP-2663: a tools/call
// answered with resultType "task", tasks/get, tasks/update, tasks/cancel), whose requests and
// results go through as they are (docs/decisions/0183-tasks-extension.md). The `experimental`
// capability is not advertised.
import { Buffer } from 'node:buffer';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { z } from 'zod';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  CancelTaskResultSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  GetTaskResultSchema,
  ListTasksRequestSchema,
  ListTasksResultSchema,
  CompleteRequestSchema,
  EmptyResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ListToolsResultSchema,
  ReadResourceRequestSchema,
  ToolSchema,
  ResultSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  ErrorCode,
  McpError,
  type ClientRequest,
  type LoggingLevel,
  type ServerCapabilities,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { stderrLogger, type AgentLogger, type McpServerLike } from '../agent/agent.ts';
import type { BackoffOptions } from '../agent/backoff.ts';
import type { DropWarningOptions } from './drop-warnings.ts';
import { errorResult } from '../tools/contract.ts';
import { classifyEra, TASKS_EXTENSION } from '../../protocol/stateless.ts';
import { loadScopeMap, withScope, type ScopeMap } from './scopes.ts';
import { TaskOwners } from './task-owners.ts';
import { Upstream, UpstreamUnavailableError } from './upstream.ts';

export { loadScopeMap, scopeFor, type ScopeMap } from './scopes.ts';
export { Upstream, UpstreamUnavailableError } from './upstream.ts';

export interface BridgeOptions {
  /** A stdio MCP server, run as `sh -c 'exec <cmd>'`: one command; quotes and $VARS work. */
  upstreamCmd?: string;
  /** A Streamable HTTP MCP server. */
  upstreamUrl?: string;
  /** Path of a JSON file `{"toolName": "<scope>"}` overriding the scopes derived from annotations. */
  scopeMap?: string;
  log?: AgentLogger;
  /** Restart backoff after the upstream goes away. */
  backoff?: BackoffOptions;
  /** How long the upstream has to answer initialize (INITIALIZE_TIMEOUT_MS, 30 s, unless given). */
  initializeTimeoutMs?: number;
  /** How warnings about what was dropped from the upstream are limited (the first 3, then a count every 30 s). */
  dropWarnings?: DropWarningOptions;
}

/** Called once per relay socket; also stops the shared upstream. */
export interface BridgeServerFactory {
  (): McpServerLike;
  readonly upstream: Upstream;
  close(): Promise<void>;
}

/**
 * The relay owns request deadlines (it cancels, which cancels upstream); this only bounds an
 * upstream that hangs past them.
 */
const UPSTREAM_TIMEOUT_MS = 15 * 60_000;

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export async function bridgeServerFactory(opts: BridgeOptions): Promise<BridgeServerFactory> {
  if (!opts.upstreamCmd === !opts.upstreamUrl)
    throw new Error('bridge: give exactly one of --upstream-cmd or --upstream-url');
  const scopeMap = opts.scopeMap ? loadScopeMap(opts.scopeMap) : {};
  const servers = new Set<Server>();
  let logLevel: LoggingLevel | undefined;
  const upstream: Upstream = new Upstream(opts.upstreamCmd ? { cmd: opts.upstreamCmd } : { url: opts.upstreamUrl! }, {
    log: opts.log ?? stderrLogger,
    backoff: opts.backoff,
    initializeTimeoutMs: opts.initializeTimeoutMs,
    dropWarnings: opts.dropWarnings,
    onNotification: (notification) => {
      const targets =
        notification.method === 'notifications/resources/updated'
          ? subscriptions.subscribers(notification.params.uri)
          : servers;
      for (const server of targets) notify(server, notification);
    },
    onRestart: () => {
      subscriptions.renew();
      if (logLevel)
        void upstream
          .request({ method: 'logging/setLevel', params: { level: logLevel } }, EmptyResultSchema, { timeout: 10_000 })
          .catch(() => {});
      // The relay caches tools/list per socket; a restarted server may list different things.
      // (A server made before the restart refuses a family it lacks; notify() drops that.)
      for (const notification of listChanged(upstream.info.capabilities))
        for (const server of servers) notify(server, notification);
    },
  });
  const subscriptions = new Subscriptions(upstream);
  const owners = new TaskOwners();
  await upstream.start();

  const factory = () => {
    const server = createBridgeServer(
      upstream,
      scopeMap,
      subscriptions,
      owners,
      (level) => (logLevel = level),
      opts.log ?? stderrLogger,
    );
    servers.add(server);
    server.onclose = () => {
      servers.delete(server);
      subscriptions.dropAll(server);
    };
    return server;
  };
  return Object.assign(factory, { upstream, close: () => upstream.close() });
}

/** An upstream tools/list page read entry by entry: an invalid tool is dropped, not the page. */
const ListToolsPage = ListToolsResultSchema.extend({ tools: z.array(z.unknown()) });
/** The bridge's own pages of tools/list stay this far under the relay's 256 KiB frame. */
const TOOLS_PAGE_BYTES = 192 * 1024;
const TOOLS_CURSOR = 'phonebridge-tools:';

/** Where a page of the bridge's tools/list starts; a cursor it did not give is -32602. */
function toolsOffset(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  const n = cursor.startsWith(TOOLS_CURSOR) ? Number(cursor.slice(TOOLS_CURSOR.length)) : NaN;
  if (!Number.isSafeInteger(n) || n < 0)
    throw new McpError(ErrorCode.InvalidParams, 'Invalid params: unknown tools/list cursor');
  return n;
}

/** The tools from `offset` that fit one page (at least one), and the cursor of the next. */
function toolsPage(tools: Tool[], offset: number): { tools: Tool[]; nextCursor?: string } {
  const page: Tool[] = [];
  let bytes = 0;
  for (let i = offset; i < tools.length; i++) {
    const size = Buffer.byteLength(JSON.stringify(tools[i])) + 1;
    if (page.length > 0 && bytes + size > TOOLS_PAGE_BYTES) break;
    page.push(tools[i]);
    bytes += size;
  }
  const next = offset + page.length;
  return next < tools.length ? { tools: page, nextCursor: `${TOOLS_CURSOR}${next}` } : { tools: page };
}

/** A zod error as paths and messages, without the values. */
function issuesOf(error: { issues: Array<{ path: PropertyKey[]; message: string }> }): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
    .join('; ');
}

// The SDK's request schemas strip unknown params; a bridge must not (2026-07-28 MRTR retries
// carry inputResponses/requestState that the upstream needs back untouched).
const CallToolPassThrough = CallToolRequestSchema.extend({ params: CallToolRequestSchema.shape.params.loose() });
const GetPromptPassThrough = GetPromptRequestSchema.extend({ params: GetPromptRequestSchema.shape.params.loose() });

type RawHandler = (request: ClientRequest, extra: Extra) => Promise<unknown>;
/** The SDK Server's handler table: the tasks extension's shapes are not the SDK's (it has 2025-11-25 tasks). */
const handlersOf = (server: Server) =>
  (server as unknown as { _requestHandlers: Map<string, RawHandler> })._requestHandlers;
/** A request of revision 2026-07-28 (its version in _meta, as the relay forwards it). */
const isModern = (request: ClientRequest) => classifyEra({}, request) === 'stateless';

function createBridgeServer(
  upstream: Upstream,
  scopeMap: ScopeMap,
  subscriptions: Subscriptions,
  owners: TaskOwners,
  onLogLevel: (level: LoggingLevel) => void,
  log: AgentLogger,
): Server {
  const { serverInfo, capabilities, instructions } = upstream.info;
  // Created with the upstream's capabilities, the SDK Server accepts exactly the methods it has.
  const server = new Server(serverInfo, { capabilities: proxiedCapabilities(capabilities), instructions });
  const forward = (request: ClientRequest, extra: Extra) =>
    upstream.request(request, ResultSchema, forwardOptions(request, extra));
  const forwardAs = <
    S extends typeof GetTaskResultSchema | typeof CancelTaskResultSchema | typeof ListTasksResultSchema,
  >(
    schema: S,
    request: ClientRequest,
    extra: Extra,
  ) => upstream.request(request, schema, forwardOptions(request, extra));

  if (capabilities.tools) {
    server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
      // The upstream's pages merged, then cut again into pages of the bridge's own that each fit
      // one frame to the relay, which follows nextCursor (src/gateway/phone-surface.ts). A list
      // over 256 KiB in one answer failed the phone's handshake on every reconnect.
      const offset = toolsOffset(request.params?.cursor);
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await upstream.request(
          { ...request, params: { ...request.params, cursor } },
          ListToolsPage,
          forwardOptions(request, extra),
        );
        page.tools.forEach((entry, i) => {
          const tool = ToolSchema.safeParse(entry);
          if (tool.success) tools.push(withScope(tool.data, scopeMap));
          else
            // One bad entry does not take the rest of the catalog with it; the log says which, not what.
            log.warn(`bridge: dropped tool #${tools.length + i} of the upstream's tools/list: ${issuesOf(tool.error)}`);
        });
        cursor = page.nextCursor;
      } while (cursor);
      return toolsPage(tools, offset);
    });
    const callTool = async (request: ClientRequest & { method: 'tools/call' }, extra: Extra) => {
      try {
        const result = await forward(request, extra);
        // A call answered with a task (2025-11-25 task-augmented, or the extension's
        // resultType "task"): the task is the caller's from now on.
        owners.created(request.params._meta, result);
        return result;
      } catch (err) {
        // Tool failures are results, in the phone's error envelope (docs/TOOLS.md), not JSON-RPC errors.
        if (err instanceof UpstreamUnavailableError) return errorResult('upstream_unavailable', err.message);
        throw err;
      }
    };
    server.setRequestHandler(CallToolPassThrough, callTool);
    // 2026-07-28 results (CreateTaskResult, MRTR rounds) are not the SDK's CallToolResult: they go
    // back as the upstream gave them, without the SDK's validation (which would refuse a task's
    // flat shape or add members).
    const validated = handlersOf(server).get('tools/call')!;
    handlersOf(server).set('tools/call', (request, extra) =>
      isModern(request)
        ? callTool(request as ClientRequest & { method: 'tools/call' }, extra)
        : validated(request, extra),
    );
  }
  if (capabilities.tasks) {
    // The upstream keys tasks by its one session, the bridge's: who may see a task is decided here.
    server.setRequestHandler(GetTaskRequestSchema, async (request, extra) => {
      owners.check(request.params._meta, request.params.taskId);
      return forwardAs(GetTaskResultSchema, request, extra);
    });
    server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) => {
      owners.check(request.params._meta, request.params.taskId);
      return forward(request, extra);
    });
    if (capabilities.tasks.cancel)
      server.setRequestHandler(CancelTaskRequestSchema, async (request, extra) => {
        owners.check(request.params._meta, request.params.taskId);
        return forwardAs(CancelTaskResultSchema, request, extra);
      });
    if (capabilities.tasks.list)
      server.setRequestHandler(ListTasksRequestSchema, async (request, extra) => {
        const page = await forwardAs(ListTasksResultSchema, request, extra);
        return { ...page, tasks: owners.visible(request.params?._meta, page.tasks) };
      });
  }
  if (capabilities.extensions?.[TASKS_EXTENSION]) {
    // The extension's tasks/get, tasks/update, tasks/cancel: the shapes pass through; only the
    // caller who created a task reaches it. Session-era requests keep the 2025-11-25 handlers.
    const handlers = handlersOf(server);
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel'] as const) {
      const legacy = handlers.get(method);
      handlers.set(method, (request, extra) => {
        if (!isModern(request)) {
          if (legacy) return legacy(request, extra);
          return Promise.reject(new McpError(ErrorCode.MethodNotFound, `Method not found: ${method}`));
        }
        const params = (request.params ?? {}) as { taskId?: unknown; _meta?: Record<string, unknown> };
        owners.check(params._meta, String(params.taskId));
        return forward(request, extra);
      });
    }
  }
  if (capabilities.resources) {
    server.setRequestHandler(ListResourcesRequestSchema, forward);
    server.setRequestHandler(ListResourceTemplatesRequestSchema, forward);
    server.setRequestHandler(ReadResourceRequestSchema, forward);
    if (capabilities.resources.subscribe) {
      server.setRequestHandler(SubscribeRequestSchema, (request, extra) =>
        subscriptions.add(server, request, forwardOptions(request, extra)),
      );
      server.setRequestHandler(UnsubscribeRequestSchema, (request, extra) =>
        subscriptions.remove(server, request, forwardOptions(request, extra)),
      );
    }
  }
  if (capabilities.prompts) {
    server.setRequestHandler(ListPromptsRequestSchema, forward);
    server.setRequestHandler(GetPromptPassThrough, forward);
  }
  if (capabilities.completions) server.setRequestHandler(CompleteRequestSchema, forward);
  if (capabilities.logging) {
    // Replaces the SDK's local handler: the upstream filters its own messages. One level for all sockets.
    server.setRequestHandler(SetLevelRequestSchema, async (request, extra) => {
      const result = await forward(request, extra);
      onLogLevel(request.params.level);
      return result;
    });
  }
  return server;
}

/** The capability families the bridge proxies, as the upstream declared them. */
function proxiedCapabilities(upstream: ServerCapabilities): ServerCapabilities {
  const { tools, resources, prompts, completions, logging, tasks, extensions } = upstream;
  const taskExtension = extensions?.[TASKS_EXTENSION];
  return {
    ...(tools && { tools }),
    ...(tasks && { tasks }),
    // Of the extensions, the bridge passes on the one it knows how to proxy.
    ...(taskExtension && { extensions: { [TASKS_EXTENSION]: taskExtension } }),
    ...(resources && { resources }),
    ...(prompts && { prompts }),
    ...(completions && { completions }),
    ...(logging && { logging }),
  };
}

/**
 * The request goes upstream with its _meta (the caller context included). Upstream gets a token
 * of the bridge's own; progress comes back under the relay's token to the request that asked.
 * The relay's cancellation aborts extra.signal, which cancels upstream.
 */
function forwardOptions(request: ClientRequest, extra: Extra): RequestOptions {
  const progressToken = request.params?._meta?.progressToken;
  const options: RequestOptions = { signal: extra.signal, timeout: UPSTREAM_TIMEOUT_MS };
  if (progressToken === undefined) return options;
  return {
    ...options,
    onprogress: (progress) =>
      void extra
        .sendNotification({ method: 'notifications/progress', params: { ...progress, progressToken } })
        .catch(() => {}),
  };
}

function listChanged(capabilities: ServerCapabilities): ServerNotification[] {
  const methods = [
    capabilities.tools && 'notifications/tools/list_changed',
    capabilities.prompts && 'notifications/prompts/list_changed',
    capabilities.resources && 'notifications/resources/list_changed',
  ] as const;
  return methods.filter((method) => !!method).map((method) => ({ method }));
}

function notify(server: Server, notification: ServerNotification): void {
  // A socket that is closing or not yet initialized just misses it.
  server.notification(notification).catch(() => {});
}

/**
 * Upstream subscriptions are shared by the relay sockets: subscribe upstream for the first
 * subscriber of a URI, unsubscribe after the last, and send resources/updated only to subscribers.
 */
class Subscriptions {
  private readonly byUri = new Map<string, Set<Server>>();

  constructor(private readonly upstream: Upstream) {}

  subscribers(uri: string): Iterable<Server> {
    return this.byUri.get(uri) ?? [];
  }

  async add(server: Server, request: ClientRequest & { method: 'resources/subscribe' }, options: RequestOptions) {
    const { uri } = request.params;
    if (!this.byUri.has(uri)) {
      await this.upstream.request(request, EmptyResultSchema, options);
      if (!this.byUri.has(uri)) this.byUri.set(uri, new Set());
    }
    this.byUri.get(uri)!.add(server);
    return {};
  }

  async remove(server: Server, request: ClientRequest & { method: 'resources/unsubscribe' }, options?: RequestOptions) {
    const subscribers = this.byUri.get(request.params.uri);
    if (!subscribers?.delete(server) || subscribers.size > 0) return {};
    this.byUri.delete(request.params.uri);
    return this.upstream.request(request, EmptyResultSchema, options ?? { timeout: 10_000 });
  }

  /** A relay socket closed. */
  dropAll(server: Server): void {
    for (const uri of [...this.byUri.keys()]) {
      this.remove(server, { method: 'resources/unsubscribe', params: { uri } }).catch(() => {});
    }
  }

  /** A restarted upstream has no subscriptions. */
  renew(): void {
    for (const uri of this.byUri.keys()) {
      this.upstream
        .request({ method: 'resources/subscribe', params: { uri } }, EmptyResultSchema, { timeout: 10_000 })
        .catch(() => {});
    }
  }
}

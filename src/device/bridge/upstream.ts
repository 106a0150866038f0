// The one MCP client connection to the bridged server, shared by every relay socket. When the
// server goes away it is restarted (stdio) or reconnected (HTTP) with backoff; calls made
// meanwhile fail at once with a clear error rather than hang.
import process from 'node:process';
import type { ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { AnySchema, SchemaOutput } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import {
  ErrorCode,
  LoggingMessageNotificationSchema,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type ClientRequest,
  type Implementation,
  type JSONRPCMessage,
  type Progress,
  type ProgressNotification,
  type ServerCapabilities,
  type ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { AGENT_VERSION, type AgentLogger } from '../agent/agent.ts';
import { Backoff, type BackoffOptions } from '../agent/backoff.ts';
import { HttpUpstreamTransport } from './answer-streams.ts';
import { DropWarnings, type DropKind, type DropWarningOptions } from './drop-warnings.ts';
import { LineReader, SharedLineError } from './line-reader.ts';

export type UpstreamTarget = { cmd: string } | { url: string };

/** What the upstream said in initialize; the bridge answers the relay's initialize with it. */
export interface UpstreamInfo {
  serverInfo: Implementation;
  capabilities: ServerCapabilities;
  instructions?: string;
}

/** A JSON-RPC error whose message goes out as is (McpError would prefix "MCP error <code>: "). */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export class UpstreamUnavailableError extends RpcError {
  constructor(message: string) {
    super(ErrorCode.InternalError, message, { code: 'upstream_unavailable' });
  }
}

/** The notifications relayed to the relay; progress travels separately, per request. */
const RELAYED_NOTIFICATIONS = [
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
  PromptListChangedNotificationSchema,
];

/** Quick first retries (a local process that crashed once), widening to 30 s for one that keeps failing. */
const RESTART_BACKOFF: BackoffOptions = { baseMs: 250, dropWindowMs: 250, capMs: 30_000 };

/** How long a request whose session the server ended waits for the new session to go again on. */
const RESEND_WITHIN_MS = 10_000;

/**
 * How long a new upstream has to answer initialize, at start and at each restart: a local
 * server answers in well under a second once its runtime is up
 * (docs/decisions/0226-bridge-upstream-start.md).
 */
export const INITIALIZE_TIMEOUT_MS = 30_000;

export interface UpstreamOptions {
  log: AgentLogger;
  backoff?: BackoffOptions;
  /** INITIALIZE_TIMEOUT_MS unless given. */
  initializeTimeoutMs?: number;
  /** How the warnings about what was dropped from the upstream are limited. */
  dropWarnings?: DropWarningOptions;
  onNotification: (notification: ServerNotification) => void;
  /** After a restart: the new server knows nothing of earlier subscriptions, log level or lists. */
  onRestart: () => void;
}

export class Upstream {
  private client: Client | undefined;
  private closed = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private downReason = 'not started';
  /** Upstream progress token → where its progress goes. Tokens are ours: unique per bridge. */
  private readonly progressRoutes = new Map<string, (progress: Progress) => void>();
  private progressTokens = 0;
  /** Requests waiting for a restart to go again on (a session the server ended). */
  private readonly backWaiters = new Set<(back: boolean) => void>();
  private readonly backoff: Backoff;
  /** The upstream in log lines and errors: a URL without secrets, a command's program only. */
  readonly label: string;
  private readonly initializeTimeoutMs: number;
  /** Shared by every connection: a restarted server that floods stdout again is still counted. */
  private readonly drops: DropWarnings;
  info: UpstreamInfo = { serverInfo: { name: 'unknown', version: '0' }, capabilities: {} };

  constructor(
    private readonly target: UpstreamTarget,
    private readonly options: UpstreamOptions,
  ) {
    this.backoff = new Backoff({ ...RESTART_BACKOFF, ...options.backoff });
    // A command's arguments (paths, tokens) stay out of the operator's log as well.
    this.label = 'url' in target ? withoutSecrets(target.url) : `"${programOf(target.cmd)}"`;
    this.initializeTimeoutMs = options.initializeTimeoutMs ?? INITIALIZE_TIMEOUT_MS;
    this.drops = new DropWarnings(
      (message) => options.log.warn(`bridge: upstream ${this.label}: ${message}`),
      options.dropWarnings,
    );
  }

  /** An error as the log may show it: an upstream URL quoted in it (fetch does) as `label`. */
  private describe(err: unknown): string {
    return this.scrub(describe(err));
  }

  private scrub(text: string): string {
    return 'url' in this.target ? text.split(this.target.url).join(this.label) : text;
  }

  /** The first connection; throws, so a wrong command or URL stops `device run` at once. */
  async start(): Promise<void> {
    try {
      this.attach(await this.connect());
    } catch (err) {
      throw new Error(`bridge: could not start the upstream MCP server ${this.label}: ${this.describe(err)}`, {
        cause: err,
      });
    }
  }

  get connected(): boolean {
    return this.client !== undefined;
  }

  /** The stdio server's process id (for tests and logs). */
  get pid(): number | undefined {
    const transport = this.client?.transport;
    return transport instanceof StdioClientTransport ? (transport.pid ?? undefined) : undefined;
  }

  /**
   * Sends one request upstream. The upstream's own JSON-RPC errors come back unchanged; a lost
   * connection becomes UpstreamUnavailableError and starts a restart.
   */
  async request<S extends AnySchema>(
    request: ClientRequest,
    resultSchema: S,
    options: RequestOptions,
    resent = false,
  ): Promise<SchemaOutput<S>> {
    const asked = request;
    const client = this.client;
    if (!client) throw this.unavailable();
    const { onprogress, ...sdkOptions } = options;
    let progressToken: string | undefined;
    if (onprogress) {
      progressToken = `phonebridge-${++this.progressTokens}`;
      this.progressRoutes.set(progressToken, onprogress);
      request = {
        ...request,
        params: { ...request.params, _meta: { ...request.params?._meta, progressToken } },
      } as ClientRequest;
    }
    try {
      return await client.request(request, resultSchema, sdkOptions);
    } catch (err) {
      if (options.signal?.aborted) throw err; // cancelled by the relay: nobody reads the answer
      if (err instanceof McpError && err.code !== (ErrorCode.ConnectionClosed as number)) {
        throw new RpcError(err.code, err.message.replace(/^MCP error -?\d+: /, ''), err.data);
      }
      // A well-formed answer the bridge cannot use: the server is up, only this answer failed.
      const issues = schemaIssues(err);
      if (issues) {
        throw new RpcError(
          ErrorCode.InternalError,
          `the bridged MCP server sent a malformed ${request.method} result: ${issues}`,
        );
      }
      if (err instanceof StreamableHTTPError && (err.code ?? 0) >= 400 && err.code !== 404) {
        // An HTTP server that answered this request with an error status (500, 503, 429, 401…)
        // is up: this request failed, the others in flight go on (as for stdio, decision 0227).
        // Its body is the server's, not for the client.
        throw new RpcError(
          ErrorCode.InternalError,
          `the bridged MCP server answered ${request.method} with HTTP ${err.code}`,
        );
      }
      // 404: the server ended the session, which only a new one mends (MCP, Streamable HTTP).
      // It did not run the request, so the request goes again, once, on the new session.
      const sessionEnded = err instanceof StreamableHTTPError && err.code === 404;
      this.dropped(client, sessionEnded ? 'the server ended its session (HTTP 404)' : this.describe(err));
      if (sessionEnded && !resent && (await this.untilBack(RESEND_WITHIN_MS, options.signal)))
        return this.request(asked, resultSchema, options, true);
      throw this.unavailable();
    } finally {
      if (progressToken) this.progressRoutes.delete(progressToken);
    }
  }

  /** Whether the upstream is connected again within `ms` (false once closed or aborted). */
  private untilBack(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (this.client) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (back: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        this.backWaiters.delete(waiter);
        resolve(back);
      };
      const waiter = (back: boolean) => done(back);
      const aborted = () => done(false);
      const timer = setTimeout(() => done(false), ms);
      signal?.addEventListener('abort', aborted, { once: true });
      this.backWaiters.add(waiter);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of [...this.backWaiters]) w(false);
    clearTimeout(this.restartTimer);
    this.drops.close();
    const client = this.client;
    this.client = undefined;
    // An HTTP server keeps a session until told; a stdio server is ended by closing its stdin.
    if (client?.transport instanceof StreamableHTTPClientTransport)
      await client.transport.terminateSession().catch(() => {});
    await client?.close();
  }

  /** Goes to the MCP client: without the label, which is the operator's command line or URL. */
  private unavailable(): UpstreamUnavailableError {
    const what = this.closed ? 'the bridge is shutting down' : `${this.downReason}; restarting it with backoff`;
    return new UpstreamUnavailableError(`the bridged MCP server is unavailable: ${what}`);
  }

  private async connect(): Promise<Client> {
    // No client capabilities: sampling, elicitation and roots cannot reach a client through the relay.
    const client = new Client({ name: 'phonebridge-bridge', version: AGENT_VERSION }, { capabilities: {} });
    // eslint-disable-next-line @typescript-eslint/require-await -- the SDK expects a promise; the throw becomes the error answer
    client.fallbackRequestHandler = async (request) => {
      this.options.log.warn(
        `bridge: refused ${request.method} from the upstream MCP server (requests from the phone never reach MCP clients)`,
      );
      throw new RpcError(
        ErrorCode.MethodNotFound,
        `${request.method} is not available: this MCP server is bridged through a phonebridge relay, which does not forward requests from the server to MCP clients (no sampling, elicitation or roots)`,
      );
    };
    for (const schema of RELAYED_NOTIFICATIONS) {
      client.setNotificationHandler(schema, (notification) => this.options.onNotification(notification));
    }
    client.onerror = (err) => {
      // Writing to a server that has exited: the exit itself is what gets reported (a start-up
      // error, or "lost the upstream").
      if ((err as NodeJS.ErrnoException).code === 'EPIPE') return;
      const dropped = droppedKind(err);
      if (dropped) this.drops.dropped(dropped);
      else this.options.log.warn(`bridge: upstream ${this.label}: ${this.scrub(withoutContent(err))}`);
    };
    const transport = this.transport();
    // The SDK closes a client whose initialize failed without waiting for the close (stdin
    // ended, then SIGTERM, then SIGKILL); the bridge waits, so a server that ignores its closed
    // stdin is not left running when `device run` exits on the error.
    const closing: Promise<void>[] = [];
    const close = transport.close.bind(transport);
    transport.close = () => {
      const closed = close();
      closing.push(closed);
      return closed;
    };
    try {
      await client.connect(transport, { timeout: this.initializeTimeoutMs });
    } catch (err) {
      await Promise.allSettled([client.close(), ...closing]);
      throw this.startFailure(err, transport);
    }
    // Progress is routed here, synchronously in arrival order, not through the SDK's onprogress:
    // the SDK settles a response at once but defers notifications to a microtask, so the last
    // progress of a request that returns right after it would be lost (typescript-sdk#2580).
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      const route = isProgress(message) && this.progressRoutes.get(String(message.params.progressToken));
      if (route) route(progressOf(message.params));
      else deliver?.(message, extra);
    };
    return client;
  }

  /** Why a new connection failed, in words the operator can act on (no command line in them). */
  private startFailure(err: unknown, transport: Transport): unknown {
    if (!(err instanceof McpError)) return err;
    if (err.code === (ErrorCode.RequestTimeout as number))
      return new Error(`the upstream did not answer initialize within ${this.initializeTimeoutMs / 1000} s`);
    // The connection closed because the process ended. The command runs as `sh -c 'exec CMD'`:
    // a program the shell cannot exec ends it with 127 (not found) or 126 (not executable).
    const exit =
      err.code === (ErrorCode.ConnectionClosed as number) && transport instanceof StdioUpstreamTransport
        ? transport.exit
        : undefined;
    if (exit?.code === 127) return new Error('command not found (ENOENT; exit status 127 before initialize)');
    if (exit?.code === 126) return new Error('not executable (EACCES; exit status 126 before initialize)');
    if (exit?.code != null) return new Error(`it exited with status ${exit.code} before answering initialize`);
    if (exit?.signal) return new Error(`it was ended by ${exit.signal} before answering initialize`);
    return err;
  }

  private transport(): Transport {
    // Watches its answers' SSE streams: one that ends without its answer fails that request alone.
    if ('url' in this.target) return new HttpUpstreamTransport(new URL(this.target.url));
    // A shell so the command works as typed (quotes, $VARS, ~); `exec` makes the server itself the
    // child, so its exit is seen at once and closing the bridge signals it rather than a shell.
    // The whole environment is passed: the operator's upstream may need its API keys.
    const env = Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
    );
    return new StdioUpstreamTransport({
      command: 'sh',
      args: ['-c', `exec ${this.target.cmd}`],
      env,
      stderr: 'inherit',
    });
  }

  private attach(client: Client): void {
    this.client = client;
    this.backoff.connected();
    const capabilities = client.getServerCapabilities() ?? {};
    this.info = {
      serverInfo: client.getServerVersion() ?? this.info.serverInfo,
      capabilities,
      instructions: client.getInstructions(),
    };
    client.onclose = () => this.dropped(client, 'the connection closed (the process exited?)');
  }

  private dropped(client: Client, reason: string): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    this.downReason = reason;
    void client.close().catch(() => {});
    this.options.log.warn(`bridge: lost the upstream MCP server ${this.label}: ${reason}`);
    this.backoff.dropped();
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    const delayMs = this.backoff.next();
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- the body catches every error itself
    this.restartTimer = setTimeout(async () => {
      try {
        const client = await this.connect();
        if (this.closed) return void (await client.close());
        this.attach(client);
        this.options.log.info(`bridge: the upstream MCP server ${this.label} is back`);
        this.options.onRestart();
        for (const w of [...this.backWaiters]) w(true);
      } catch (err) {
        this.downReason = `restart failed: ${this.describe(err)}`;
        if (this.closed) return;
        this.options.log.warn(`bridge: ${this.downReason}`);
        this.scheduleRestart();
      }
    }, delayMs);
  }
}

/**
 * The SDK's stdio transport, keeping how the child ended: the SDK drops the exit status
 * (client/stdio.js, its 'close' handler), and the status tells a command the shell could not
 * run from a server that exited on its own. Its stdout is read by a LineReader.
 */
class StdioUpstreamTransport extends StdioClientTransport {
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  constructor(server: StdioServerParameters) {
    super(server);
    // The SDK's ReadBuffer, private in its types, replaced with one that fails the request
    // whose answer shared its line (docs/decisions/0227-an-answer-that-shares-its-line.md).
    (this as unknown as { _readBuffer: LineReader })._readBuffer = new LineReader(server.maxBufferSize);
  }

  override async start(): Promise<void> {
    await super.start();
    // The child is private in the SDK's types. start() resolves on 'spawn', before any 'exit'.
    const child = (this as unknown as { _process?: ChildProcess })._process;
    child?.once('exit', (code, signal) => (this.exit = { code, signal }));
  }
}

/**
 * The program of an --upstream-cmd: its first word as the shell reads it, quotes removed, for
 * messages that must not carry the arguments (paths, tokens). A `NAME=value` first word, which
 * `exec` takes for the program, is shown as `NAME=…`: its value may be a secret.
 */
export function programOf(cmd: string): string {
  let word = '';
  let quote: string | undefined;
  const text = cmd.trimStart();
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = undefined;
      else if (quote === '"' && c === '\\' && '"\\$`'.includes(text[i + 1] ?? '')) word += text[++i];
      else word += c;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '\\' && i + 1 < text.length) word += text[++i];
    else if (/[\s;&|<>()]/.test(c)) break;
    else word += c;
  }
  const assignment = /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(word);
  return assignment ? `${assignment[1]}=…` : word;
}

function isProgress(message: JSONRPCMessage): message is ProgressNotification & JSONRPCMessage {
  return 'method' in message && message.method === 'notifications/progress' && !('id' in message);
}

function progressOf({ progressToken: _token, ...progress }: ProgressNotification['params']): Progress {
  return progress;
}

/**
 * The issues of a failed result validation, as `path: message` (the SDK's zod-mini errors are
 * named `$ZodError`, classic zod's `ZodError`: both have `issues`). Undefined for other errors.
 */
function schemaIssues(err: unknown): string | undefined {
  const issues = (err as { issues?: unknown } | undefined)?.issues;
  if (!(err instanceof Error) || !Array.isArray(issues)) return undefined;
  return (issues as { path?: PropertyKey[]; message?: string }[])
    .slice(0, 5)
    .map((issue) => `${(issue.path ?? []).map(String).join('.') || '(result)'}: ${issue.message ?? 'invalid'}`)
    .join('; ');
}

/** What the bridge drops from an upstream, warned about the first few times, then counted. */
const DROPPED = {
  sharedLine: {
    warning:
      'dropped a line that held a message and more output (a stdio MCP server must end every message with a newline); the requests answered on it fail saying so',
    one: 'line that held a message and more output',
    many: 'lines that held a message and more output',
  },
  notJson: {
    warning:
      'dropped a line that is not JSON (a stdio MCP server must write only JSON-RPC to stdout; logs go to stderr)',
    one: 'non-JSON line',
    many: 'non-JSON lines',
  },
  notJsonRpc: {
    warning: 'dropped a message that is not JSON-RPC',
    one: 'message that is not JSON-RPC',
    many: 'messages that are not JSON-RPC',
  },
  strayAnswer: {
    warning: 'dropped an answer to a request it did not send or that was already answered',
    one: 'answer to a request it did not send or that was already answered',
    many: 'answers to requests it did not send or that were already answered',
  },
  strayProgress: {
    warning: 'dropped progress for a token it was not given',
    one: 'progress notification for a token it was not given',
    many: 'progress notifications for tokens it was not given',
  },
  unknownType: {
    warning: 'dropped a message of unknown type',
    one: 'message of unknown type',
    many: 'messages of unknown type',
  },
} satisfies Record<string, DropKind>;

/**
 * What the SDK reported dropping, if it is a drop. Its own messages quote what the server sent
 * (a stray answer in full, the start of a non-JSON line): message content, which stays out of
 * logs.
 */
function droppedKind(err: Error): DropKind | undefined {
  if (err instanceof SharedLineError) return DROPPED.sharedLine;
  if (err instanceof SyntaxError) return DROPPED.notJson;
  if (schemaIssues(err)) return DROPPED.notJsonRpc;
  if (err.message.startsWith('Received a response for an unknown message ID')) return DROPPED.strayAnswer;
  if (err.message.startsWith('Received a progress notification for an unknown token')) return DROPPED.strayProgress;
  if (err.message.startsWith('Unknown message type')) return DROPPED.unknownType;
  return undefined;
}

/** Any other error on the upstream connection, for the operator's log: cut short. */
function withoutContent(err: Error): string {
  return err.message.length > 200 ? `${err.message.slice(0, 200)}…` : err.message;
}

/**
 * An upstream URL as the log may show it: without its user info (`***@`: the user name is a
 * secret too when it carries a token alone, `https://<token>@host`) and without its query, where
 * tokens travel (`?token=…`); the URL itself is used as given.
 */
export function withoutSecrets(url: string): string {
  try {
    const u = new URL(url);
    if (u.username || u.password) {
      u.username = '***';
      u.password = '';
    }
    const query = u.search ? '?…' : '';
    u.search = '';
    return `${u.toString()}${query}`;
  } catch {
    return '(an unparsable URL)';
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause as { code?: string; message?: string } | undefined;
  return cause ? `${err.message} (${cause.code ?? cause.message})` : err.message;
}

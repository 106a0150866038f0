// What the relay learns from a phone at connect and keeps current: its initialize result and
// its tool catalog (every tools/list page), asked for by the relay itself as the phone's MCP
// client, reloaded on notifications/tools/list_changed, and shared per node between phones
// that serve the same surface (docs/decisions/0060-shared-phone-surfaces.md). The phone
// socket (src/gateway/device-connection.ts) owns one and checks scopes against it.
import { parseJson } from '../protocol/exact-json.ts';
import type { JsonRpcId } from '../protocol/jsonrpc.ts';
import type { JsonRpcErrorObject } from '../protocol/errors.ts';
import { LATEST_SESSION_REVISION } from '../protocol/revisions.ts';
import { ToolCatalog, type ToolLike } from '../protocol/scopes.ts';
import type { Logger } from '../log.ts';
import { InternTable, type Shared } from './intern-table.ts';
import type { CallHandle, DeviceConnectionEvents, ReplySink } from './device-connection.ts';

/** Per node: what phones of one fleet share (docs/decisions/0060-shared-phone-surfaces.md). */
const initResults = new InternTable<Record<string, unknown>>();
const toolPages = new InternTable<{ tools: ToolLike[]; nextCursor?: string }>();
const catalogs = new InternTable<ToolCatalog>();

/** The result of the relay's own request, or why the phone refused it. */
function resultOf(method: string, frame: Buffer): Record<string, unknown> {
  let parsed: { result?: unknown; error?: JsonRpcErrorObject };
  try {
    // Numbers kept as written (src/protocol/exact-json.ts): a schema's uint64 maximum is served as the phone wrote it.
    parsed = parseJson(frame.toString('utf8')) as typeof parsed;
  } catch {
    // JSON.parse's message quotes the text around the fault: the phone's content, kept out of
    // the log this error reaches (docs/PROTOCOL.md: a malformed answer is logged without it).
    throw new Error(`phone answered ${method} with invalid JSON (${frame.length} bytes)`);
  }
  const r = parsed.result;
  if (!r) throw new Error(`phone refused ${method}: ${parsed.error?.message ?? 'no result'}`);
  // A number, string or array is no result of these methods: caching it would hand clients
  // (and the store's cached initialize result) garbage, so the handshake fails instead.
  if (typeof r !== 'object' || Array.isArray(r)) throw new Error(`phone answered ${method} with a non-object result`);
  return r as Record<string, unknown>;
}

/** Distinct initialize results and catalogs this node holds (tests, load reports). */
export function sharedSurfaceSizes(): { initResults: number; toolPages: number; catalogs: number } {
  return { initResults: initResults.size, toolPages: toolPages.size, catalogs: catalogs.size };
}

/** The relay's initialize request (the same for every socket). */
const INITIALIZE_PARAMS = {
  protocolVersion: LATEST_SESSION_REVISION,
  capabilities: {},
  clientInfo: { name: 'phonebridge-relay', version: '0.1.0' },
};

/**
 * What the surface needs of its phone socket: the relay's own requests go through the
 * socket's forwarding like any client's (a relay id, a pending entry, --max-in-flight).
 */
export interface PhoneLink {
  readonly deviceId: string;
  readonly closed: boolean;
  forward(
    msg: { method: string; params?: Record<string, unknown> },
    clientId: JsonRpcId,
    sink: ReplySink,
    timeoutMs: number,
  ): CallHandle;
  notify(method: string, params?: Record<string, unknown>): void;
}

type SharedTools = { pages: Shared<unknown>[]; catalog: Shared<ToolCatalog> };

export class PhoneSurface {
  /** The phone's initialize result, once it answered. */
  initResult: unknown;
  /** The phone's tools (all pages), for scope checks; undefined if it serves no tools. */
  tools?: ToolCatalog;
  private sharedInit?: Shared<Record<string, unknown>>;
  private sharedTools?: SharedTools;
  private reloading = false;
  private reloadAgain = false;
  private toolsChangedFrame?: Buffer;

  constructor(
    private readonly link: PhoneLink,
    private readonly events: DeviceConnectionEvents,
    private readonly log: Logger,
    /** The deadline of the relay's own requests. */
    private readonly timeoutMs: number,
  ) {}

  /**
   * initialize + notifications/initialized, then the tool catalog: once per socket. The
   * initialize request is queued before this returns its promise (it leaves with the 101,
   * src/gateway/device-socket.ts).
   */
  async load(): Promise<void> {
    this.sharedInit = await this.callFrame('initialize', INITIALIZE_PARAMS, (frame, id) =>
      initResults.acquire(frame, () => resultOf('initialize', frame), id),
    );
    this.initResult = this.sharedInit.value;
    if (this.link.closed) this.sharedInit.release();
    this.link.notify('notifications/initialized');
    this.events.initialized(this.link.deviceId, this.initResult);
    // The first load counts as a reload: a list_changed during it asks for one more after it,
    // since its answer may describe the surface from before the change.
    this.reloading = true;
    try {
      await this.loadTools();
    } finally {
      this.reloading = false;
    }
    if (this.reloadAgain && !this.link.closed) void this.reload();
  }

  /**
   * A request of the relay's own to the phone; `file` takes the answer frame as received
   * (unparsed) and where its id is (none: the frame carries id 0), and the promise resolves
   * with what it returns. `file` runs while the frame is still uWS's memory (a view valid
   * during the message callback only, src/gateway/device-socket.ts): it must copy what it
   * keeps — the intern tables copy a frame only when it is new, so a phone like the previous
   * ones costs no copy of its 35 KB catalog page (docs/decisions/0144-accept-cuts.md). `file`
   * must parse the frame, or find it equal to one it parsed: the connection leaves the check
   * that the answer is one whole JSON object to it (ReplySink.checksWhole).
   */
  private callFrame<T>(
    method: string,
    params: Record<string, unknown> | undefined,
    file: (frame: Buffer, id?: { start: number; end: number }) => T,
  ): Promise<T> {
    return new Promise((resolve, reject) => {
      const take = (frame: Buffer, id?: { start: number; end: number }) => {
        try {
          resolve(file(frame, id));
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      };
      this.link.forward(
        { method, params },
        0,
        {
          respond: (frame) => take(frame), // id already 0
          respondAsReceived: (frame, start, end) => take(frame, { start, end }),
          // `file` parses the frame, or finds it equal to one parsed (the intern tables).
          checksWhole: true,
          fail: (e) => reject(new Error(`${method}: ${e.message}`)),
        },
        this.timeoutMs,
      );
    });
  }

  private async loadTools(): Promise<void> {
    const caps = (this.initResult as { capabilities?: { tools?: unknown } } | undefined)?.capabilities;
    if (!caps?.tools) {
      this.setTools(undefined);
      return;
    }
    const pages: Shared<{ tools: ToolLike[]; nextCursor?: string }>[] = [];
    try {
      let cursor: string | undefined;
      for (let page = 0; page < 100; page++) {
        const p = await this.callFrame('tools/list', cursor ? { cursor } : undefined, (frame, id) =>
          toolPages.acquire(
            frame,
            () => {
              const r = resultOf('tools/list', frame);
              return {
                tools: (r.tools as ToolLike[] | undefined) ?? [],
                nextCursor: r.nextCursor as string | undefined,
              };
            },
            id,
          ),
        );
        pages.push(p);
        cursor = typeof p.value.nextCursor === 'string' ? p.value.nextCursor : undefined;
        if (!cursor) break;
      }
    } catch (err) {
      for (const p of pages) p.release();
      throw err;
    }
    const catalog = catalogs.acquire(
      pages.map((p) => p.key).join(' '),
      () => new ToolCatalog(pages.flatMap((p) => p.value.tools)),
    );
    this.setTools({ pages, catalog });
  }

  private setTools(next: SharedTools | undefined): void {
    const release = (t: typeof next) => {
      t?.catalog.release();
      t?.pages.forEach((p) => p.release());
    };
    release(this.sharedTools);
    this.sharedTools = this.link.closed ? (release(next), undefined) : next;
    this.tools = this.sharedTools?.catalog.value;
  }

  /**
   * notifications/tools/list_changed from the phone (`frame`: the socket's copy). Refreshes
   * the catalog first so clients that re-list see the new surface, then tells them. One
   * reload at a time: list_changed arriving during one asks for one more after it (the latest
   * surface wins), so a storm costs two reloads, not one each, and the relay's own requests
   * (pending on the socket, counted against --max-in-flight like any other) stay at one.
   */
  toolsChanged(frame: Buffer): void {
    this.toolsChangedFrame = frame;
    if (this.reloading) {
      this.reloadAgain = true;
      return;
    }
    void this.reload();
  }

  /** Reloads until no list_changed came during the last load, then tells clients once. */
  private async reload(): Promise<void> {
    this.reloading = true;
    do {
      this.reloadAgain = false;
      await this.loadTools().catch((err) =>
        this.log.warn({ deviceId: this.link.deviceId, err: String(err) }, 'tools/list refresh failed'),
      );
    } while (this.reloadAgain && !this.link.closed);
    this.reloading = false;
    if (!this.link.closed) this.events.notification(this.link.deviceId, this.toolsChangedFrame!);
  }

  /** The socket closed (its `closed` already true): what it held of the node's tables goes back. */
  release(): void {
    this.sharedInit?.release();
    this.setTools(undefined);
  }
}

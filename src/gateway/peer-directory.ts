// What an origin node remembers about the other nodes between requests: which node owns a phone
// (so a request goes out without asking Redis first), and which nodes said goodbye (so their
// requests are routed again instead of failed). Both are hints with an expiry; Redis' ownership
// record stays the truth (router.ts decides what a stale hint costs).
import type { Bus, DeviceOwner } from '../bus/index.ts';

/**
 * How long an origin reuses a device's owner without asking Redis (one round trip saved per
 * request). A stale entry costs one extra hop: the old owner answers `redo` and the origin
 * asks again.
 */
export const OWNER_CACHE_MS = 2_000;
/** How long a goodbye counts: a node restarted under the same id after that is a new node. */
export const DEPARTED_MS = 10_000;

/** One goodbye, as `departure` returns it: compared by identity (a later goodbye is another). */
export type Departure = object;

export class PeerDirectory {
  private readonly owners = new Map<string, { owner: DeviceOwner; until: number }>();
  private readonly departed = new Map<string, NodeJS.Timeout>();

  constructor(private readonly bus: Bus) {}

  /** The owner remembered for a phone on another node, if not yet expired. */
  cachedOwner(deviceId: string, now = Date.now()): DeviceOwner | undefined {
    const e = this.owners.get(deviceId);
    if (!e) return undefined;
    if (e.until > now) return e.owner;
    this.owners.delete(deviceId);
    return undefined;
  }

  /** Asks the bus; remembers an owner on another node for OWNER_CACHE_MS. */
  async lookupOwner(deviceId: string): Promise<DeviceOwner | undefined> {
    const owner = await this.bus.ownerOf(deviceId);
    if (owner && owner.nodeId !== this.bus.nodeId)
      this.owners.set(deviceId, { owner, until: Date.now() + OWNER_CACHE_MS });
    else this.owners.delete(deviceId);
    return owner;
  }

  /** `nodeId` turned out not to hold the phone (any more). */
  forgetOwner(deviceId: string, nodeId: string): void {
    if (this.owners.get(deviceId)?.owner.nodeId === nodeId) this.owners.delete(deviceId);
  }

  /** Owners remembered on a node that left are stale. */
  forgetNode(nodeId: string): void {
    for (const [d, e] of this.owners) if (e.owner.nodeId === nodeId) this.owners.delete(d);
  }

  /** Every remembered owner is stale (the bus lost Redis, or came back to it). */
  forgetOwners(): void {
    this.owners.clear();
  }

  /** `nodeId` said goodbye: it counts as departed for DEPARTED_MS, and owners on it are stale. */
  saidBye(nodeId: string): void {
    clearTimeout(this.departed.get(nodeId));
    // Long enough to cover the node's liveness lapsing; a restart under the same id says nothing.
    const t = setTimeout(() => this.departed.delete(nodeId), DEPARTED_MS);
    t.unref();
    this.departed.set(nodeId, t);
    this.forgetNode(nodeId);
  }

  /** Whether `nodeId` said goodbye within DEPARTED_MS (and its departure was not ended). */
  hasDeparted(nodeId: string): boolean {
    return this.departed.has(nodeId);
  }

  /** `nodeId`'s current goodbye, to end exactly that one later (endDeparture). */
  departure(nodeId: string): Departure | undefined {
    return this.departed.get(nodeId);
  }

  /** Forgets the goodbye `d` of `nodeId`, unless the node said goodbye again since. */
  endDeparture(nodeId: string, d: Departure | undefined): void {
    const t = this.departed.get(nodeId);
    if (t === undefined || t !== d) return;
    clearTimeout(t);
    this.departed.delete(nodeId);
  }

  close(): void {
    for (const t of this.departed.values()) clearTimeout(t);
  }
}

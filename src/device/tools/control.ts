// Who may use the phone right now: leases, recorded outcomes (idempotency) and the active run.
// It lives beside the phone, not inside an McpServer, so every connection to one phone shares it.
import type { SimPhone } from '../sim/model.ts';
import { ToolError, type Caller } from './contract.ts';

export interface Lease {
  id: string;
  holder: string;
  expiresAt: number;
}

export interface Outcome {
  tool: string;
  /** The arguments that produced it, so a reused key with other arguments is caught. */
  fingerprint: string;
  recordedAt: number;
  /** Read at replay time: a run's outcome is its current state. */
  read(): Record<string, unknown>;
}

export type RunStatus = 'running' | 'completed' | 'stopped' | 'failed';

export interface Run {
  id: string;
  owner: string;
  goal: string;
  steps: readonly { action: string }[];
  status: RunStatus;
  stepsDone: number;
  startedAt: number;
  endedAt: number | null;
  failure: { code: string; message: string } | null;
  /** Aborted by stop_run, or by cancelling a waiting start_run. */
  readonly stopper: AbortController;
}

/** Observers may look at a free device; actors take it; a run holds it by itself. */
export type Access = 'observe' | 'act' | 'run';

const RUNS_KEPT = 50;

export class PhoneControl {
  private lease: Lease | null = null;
  private leaseCounter = 0;
  private outcomes = new Map<string, Outcome>();
  private runs = new Map<string, Run>();
  private runCounter = 0;

  // ---- leases -------------------------------------------------------------

  /** The current lease, or null once it has expired (expiry frees the device). */
  currentLease(now: number): Lease | null {
    if (this.lease && now >= this.lease.expiresAt) this.lease = null;
    return this.lease;
  }

  /**
   * Checks the caller may use the device and renews its lease. Returns the lease id in force
   * for the call (null: a free device observed, or a run without a lease). Throws without side
   * effects when refused.
   */
  authorize(caller: Caller, leaseId: string | undefined, access: Access, now: number, ttlMs: number): string | null {
    const run = this.activeRun;
    if (run && access !== 'observe' && (access === 'run' || run.owner !== caller.credential)) {
      throw new ToolError('device_busy', `run ${run.id} holds the device; wait for it to end or stop it`, {
        runId: run.id,
      });
    }
    const lease = this.currentLease(now);
    if (leaseId !== undefined) {
      if (!lease || lease.id !== leaseId || lease.holder !== caller.credential) {
        throw new ToolError(
          'lease_mismatch',
          `lease ${leaseId} is not the current lease on this device (it expired, was released, or is not yours); omit leaseId or take_device again`,
        );
      }
      lease.expiresAt = now + ttlMs;
      return lease.id;
    }
    if (lease) {
      if (lease.holder !== caller.credential) {
        throw new ToolError('lease_required', 'another caller holds the lease on this device', {
          retryAfterS: Math.ceil((lease.expiresAt - now) / 1000),
        });
      }
      lease.expiresAt = now + ttlMs;
      return lease.id;
    }
    if (access !== 'act') return null;
    if (!caller.scopes.includes('devices:lease')) {
      throw new ToolError(
        'lease_required',
        'this device is not leased to you and your credential lacks devices:lease to take it; take_device with a credential that has it',
      );
    }
    return this.take(caller, now, ttlMs).id;
  }

  /** Takes a free device, or renews the lease the caller already holds. */
  take(caller: Caller, now: number, ttlMs: number): Lease & { renewed: boolean } {
    const run = this.activeRun;
    if (run && run.owner !== caller.credential) {
      throw new ToolError('device_busy', `run ${run.id} holds the device`, { runId: run.id });
    }
    const lease = this.currentLease(now);
    if (lease && lease.holder !== caller.credential) {
      throw new ToolError('device_busy', 'another caller holds the lease on this device', {
        retryAfterS: Math.ceil((lease.expiresAt - now) / 1000),
      });
    }
    if (lease) {
      lease.expiresAt = now + ttlMs;
      return { ...lease, renewed: true };
    }
    this.lease = { id: `lease-${++this.leaseCounter}`, holder: caller.credential, expiresAt: now + ttlMs };
    return { ...this.lease, renewed: false };
  }

  release(caller: Caller, leaseId: string, now: number): void {
    const lease = this.currentLease(now);
    if (!lease || lease.id !== leaseId || lease.holder !== caller.credential) {
      throw new ToolError(
        'lease_mismatch',
        `lease ${leaseId} is not the current lease on this device (it expired, was released, or is not yours)`,
      );
    }
    this.lease = null;
  }

  /** The credential is revoked (src/device/tools/revocation.ts): its lease ends now. */
  releaseHeldBy(credential: string): boolean {
    if (this.lease?.holder !== credential) return false;
    this.lease = null;
    return true;
  }

  // ---- idempotency: outcomes by (credential, key), bounded by age and count (LRU) ----

  recall(credential: string, key: string, now: number, ttlMs: number): Outcome | undefined {
    const id = JSON.stringify([credential, key]);
    const outcome = this.outcomes.get(id);
    if (!outcome) return undefined;
    this.outcomes.delete(id);
    if (now - outcome.recordedAt >= ttlMs) return undefined;
    this.outcomes.set(id, outcome); // most recently used goes last
    return outcome;
  }

  record(credential: string, key: string, outcome: Outcome, maxEntries: number): void {
    const id = JSON.stringify([credential, key]);
    this.outcomes.delete(id);
    this.outcomes.set(id, outcome);
    while (this.outcomes.size > maxEntries) this.outcomes.delete(this.outcomes.keys().next().value!);
  }

  // ---- runs ---------------------------------------------------------------

  get activeRun(): Run | undefined {
    return [...this.runs.values()].find((r) => r.status === 'running');
  }

  /** A run by id, or without an id the active run, else the latest. */
  findRun(runId?: string): Run | undefined {
    if (runId !== undefined) return this.runs.get(runId);
    return this.activeRun ?? [...this.runs.values()].at(-1);
  }

  createRun(owner: string, goal: string, steps: readonly { action: string }[], now: number): Run {
    const run: Run = {
      id: `run-${++this.runCounter}`,
      owner,
      goal,
      steps,
      status: 'running',
      stepsDone: 0,
      startedAt: now,
      endedAt: null,
      failure: null,
      stopper: new AbortController(),
    };
    this.runs.set(run.id, run);
    for (const old of this.runs.values()) {
      if (this.runs.size <= RUNS_KEPT) break;
      if (old.status !== 'running') this.runs.delete(old.id);
    }
    return run;
  }
}

const controls = new WeakMap<SimPhone, PhoneControl>();

/** The control state shared by every server of one phone. */
export function controlFor(phone: SimPhone): PhoneControl {
  let control = controls.get(phone);
  if (!control) controls.set(phone, (control = new PhoneControl()));
  return control;
}

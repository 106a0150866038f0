// /api/v1's routes: schemas (the same ones the OpenAPI document is made of) and handlers.
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import { z } from 'zod';
import { newApiToken, newId, sha256Hex } from '../../crypto/secrets.ts';
import { SCOPES, type LabelledDevice, type Scope, type Token } from '../../store/index.ts';
import type { GatewayContext } from '../../gateway/context.ts';
import { ApiError, keyRevoked, subscriptionRequired, type Method } from './route.ts';
import {
  factLabels,
  formatSelector,
  LabelError,
  matches,
  parseSelector,
  selectorFromObject,
  validateLabels,
  isFactKey,
  labelKeyProblem,
  MAX_LABELS,
} from '../labels.ts';
import { allLabels, shown } from '../access.ts';
import { allocate, containsPart, onlineNode } from '../allocations.ts';
import type { ResolvedFleetKey } from '../keys.ts';
import { createEnrollment, enrollmentJson, MAX_ENROLL_PHONES } from '../enroll.ts';
import { fleetMetrics } from '../metrics.ts';
import { announce, poolWaiters } from '../pool-waiters.ts';

const Id = z.object({ id: z.string().min(1).max(200) });
const ScopeEnum = z.enum(SCOPES);
const LabelMap = z.record(z.string(), z.string()).meta({ id: 'Labels', description: 'key=value labels' });

const Device = z
  .object({
    id: z.string(),
    name: z.string(),
    labels: LabelMap.describe('Hand-set labels'),
    facts: LabelMap.describe('The phone’s own facts (phonebridge.dev/…), read-only'),
    online: z.boolean(),
    node: z.string().nullable().describe('The relay node holding the phone’s socket'),
    allocated: z.boolean(),
    app_version: z.string().nullable(),
    last_seen_at: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'Device' });

const DeviceList = z.object({ items: z.array(Device), next_cursor: z.string().nullable() }).meta({ id: 'DeviceList' });

const ListQuery = z.object({
  selector: z.string().max(2000).optional().describe('k=v,k!=v,k in (a,b),k notin (a,b),k,!k'),
  cursor: z.string().max(400).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

// Request bodies are strict: a misspelt field ("selctor") is a 400, not silently ignored.
const LabelsPatch = z
  .strictObject({
    labels: z
      .record(z.string(), z.string().nullable())
      .describe('A value sets the label, null removes it (JSON merge patch)'),
  })
  .meta({ id: 'LabelsPatch' });

const AllocationRequest = z
  .strictObject({
    selector: z.record(z.string(), z.string()).default({}).describe('Labels the phone must have (all of them)'),
    ttl_s: z.number().int().min(5).max(86_400),
    include_offline: z.boolean().default(false).describe('Also hand out phones that are not connected'),
    wait_s: z.number().min(0).max(60).default(0).describe('Wait up to this long for a phone to become free'),
  })
  .meta({ id: 'AllocationRequest' });

const Allocation = z
  .object({ id: z.string(), device_id: z.string(), mcp_url: z.string(), expires_at: z.string() })
  .meta({ id: 'Allocation' });

const Renew = z.strictObject({ ttl_s: z.number().int().min(5).max(86_400).optional() }).meta({ id: 'RenewRequest' });

const KeyCreate = z
  .strictObject({ device_id: z.string().min(1), scopes: z.array(ScopeEnum).min(1).optional() })
  .meta({ id: 'KeyCreate' });
const Key = z
  .object({
    id: z.string(),
    kind: z.enum(['device', 'fleet']),
    device_id: z.string().nullable(),
    selector: z.string().nullable(),
    scopes: z.array(ScopeEnum),
    created_at: z.string(),
  })
  .meta({ id: 'Key' });
const KeyCreated = z
  .object({ id: z.string(), token: z.string(), device_id: z.string(), scopes: z.array(ScopeEnum) })
  .meta({ id: 'KeyCreated' });

const EnrollmentCreate = z
  .strictObject({
    max_phones: z.number().int().min(1).max(MAX_ENROLL_PHONES),
    expires_s: z
      .number()
      .int()
      .min(60)
      .max(365 * 86_400),
    labels: z.record(z.string(), z.string()).default({}),
    name_prefix: z.string().max(40).optional(),
  })
  .meta({ id: 'EnrollmentCreate' });
const Enrollment = z
  .object({
    id: z.string(),
    account_id: z.string(),
    max_phones: z.number().int(),
    used: z.number().int(),
    labels: LabelMap,
    name_prefix: z.string().nullable(),
    expires_at: z.string(),
    state: z.enum(['active', 'expired', 'used_up', 'revoked']),
  })
  .meta({ id: 'Enrollment' });
const EnrollmentCreated = z
  .object({
    id: z.string(),
    code: z.string().describe('Shown once'),
    qr: z.object({ v: z.literal(1), relay: z.string(), code: z.string(), fp: z.string().optional() }),
  })
  .meta({ id: 'EnrollmentCreated' });

export interface ApiRoute {
  method: Method;
  path: string;
  operationId: string;
  summary: string;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  status: number;
  response?: z.ZodType;
  /**
   * The scope the fleet key needs, checked before the handler runs (403 insufficient_scope
   * otherwise) and named in the document (docs/decisions/0175-api-v1.md, 0213-allocations-need-devices-lease.md,
   * 0244-key-and-enrollment-routes-need-scopes.md).
   */
  scope?: Scope;
  /**
   * A scope rule no one scope states, which the handler checks (403 insufficient_scope), in
   * words for the document: "every scope of the key it revokes".
   */
  scopeRule?: string;
  errors: string[];
  handle(
    ctx: GatewayContext,
    fk: ResolvedFleetKey,
    input: { params: unknown; query: unknown; body: unknown },
  ): Promise<unknown>;
}

type In<T> = T extends z.ZodType ? z.output<T> : Record<string, never>;

/** A route whose handler is typed by its own schemas (what they parsed is what it gets). */
function route<
  P extends z.ZodType | undefined = undefined,
  Q extends z.ZodType | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(
  r: Omit<ApiRoute, 'handle' | 'params' | 'query' | 'body'> & {
    params?: P;
    query?: Q;
    body?: B;
    handle(
      ctx: GatewayContext,
      fk: ResolvedFleetKey,
      input: { params: In<P>; query: In<Q>; body: In<B> },
    ): Promise<unknown>;
  },
): ApiRoute {
  return r;
}

export function needScope(fk: ResolvedFleetKey, scope: Scope): void {
  if (!fk.key.scopes.includes(scope))
    throw new ApiError(403, 'insufficient_scope', `this fleet key lacks the ${scope} scope`);
}

/**
 * A key revokes only a key whose every scope it holds: it never takes away a power it does not
 * have (docs/decisions/0244-key-and-enrollment-routes-need-scopes.md).
 */
function needScopesOf(fk: ResolvedFleetKey, target: { id: string; scopes: readonly Scope[] }): void {
  const missing = target.scopes.find((s) => !fk.key.scopes.includes(s));
  if (missing !== undefined)
    throw new ApiError(
      403,
      'insufficient_scope',
      `this fleet key lacks the ${missing} scope, which key ${target.id} holds (a key revokes only keys within its scopes)`,
    );
}

/**
 * A request that waited (wait_s) for a phone: its key and account checked again before it takes
 * one, as the server checked them when it began (server.ts), since either may have ended since.
 */
async function stillAllowed(ctx: GatewayContext, fk: ResolvedFleetKey): Promise<void> {
  const [key, account] = await Promise.all([ctx.store.fleet.getKey(fk.key.id), ctx.store.getAccount(fk.account.id)]);
  if (!key || ctx.hub.isRevoked({ tokenId: fk.key.id })) throw keyRevoked();
  if (!account || account.locked || ctx.hub.isRevoked({ accountId: fk.account.id })) throw subscriptionRequired();
}

function needAccountWide(fk: ResolvedFleetKey, what: string): void {
  if (fk.selector.length > 0)
    throw new ApiError(
      403,
      'account_key_required',
      `${what} needs a fleet key without a selector (it reaches the whole account)`,
    );
}

function selectorOr400(text: string | undefined) {
  try {
    return parseSelector(text);
  } catch (err) {
    throw new ApiError(400, 'bad_selector', (err as Error).message);
  }
}

/**
 * The account's device keys: its tokens minted as keys. An OAuth access token is a row of the
 * same table (docs/decisions/0070-hosted-accounts-and-oauth.md) but no key: its grant mints and
 * ends it (a refresh makes another), so the keys routes neither list nor revoke it.
 */
async function deviceKeys(ctx: GatewayContext, accountId: string): Promise<Token[]> {
  return (await ctx.store.listTokens({ accountId })).filter((t) => t.via === 'key');
}

/** The phone, if this key reaches it (its account, its selector); else device_not_found. */
async function reachable(ctx: GatewayContext, fk: ResolvedFleetKey, id: string): Promise<LabelledDevice> {
  const d = await ctx.store.fleet.getDevice(id);
  if (!d || d.accountId !== fk.account.id || !matches(fk.selector, allLabels(d)))
    throw new ApiError(404, 'device_not_found', `no phone ${id} this key reaches`);
  return d;
}

async function deviceJson(ctx: GatewayContext, d: LabelledDevice, allocated: boolean) {
  const node = (await onlineNode(ctx, d.id)) ?? null;
  const facts = factLabels(d.initResult);
  return {
    id: d.id,
    name: d.name,
    labels: d.labels,
    facts,
    online: node !== null,
    node,
    allocated,
    app_version: facts['phonebridge.dev/app-version'] ?? null,
    last_seen_at: d.lastSeenAt?.toISOString() ?? null,
    created_at: d.createdAt.toISOString(),
  };
}

function allocationJson(ctx: GatewayContext, a: { id: string; deviceId: string; expiresAt: Date }) {
  return {
    id: a.id,
    device_id: a.deviceId,
    mcp_url: `${ctx.config.publicUrl}/mcp/devices/${encodeURIComponent(a.deviceId)}`,
    expires_at: a.expiresAt.toISOString(),
  };
}

/**
 * Renewing or releasing an allocation that is not live: released, expired, another key's or
 * never made are one answer, whichever the store still remembers
 * (docs/decisions/0214-an-ended-allocation-is-not-found.md).
 */
function allocationNotFound(id: string): ApiError {
  return new ApiError(
    404,
    'allocation_not_found',
    `no live allocation ${shown(id, 200)} held by this key (released, expired or never made)`,
  );
}

const cursorOf = (id: string) => Buffer.from(id, 'utf8').toString('base64url');
function fromCursor(c: string | undefined): string | undefined {
  if (c === undefined) return undefined;
  const id = Buffer.from(c, 'base64url').toString('utf8');
  if (!id || cursorOf(id) !== c) throw new ApiError(400, 'bad_cursor', 'cursor: not a cursor this API returned');
  return id;
}

const SCAN_BATCH = 500;
/** A waiting allocation looks again at most this long after its last look, woken or not. */
const WAIT_FALLBACK_MS = 15_000;
/** Past an expiry before looking again (the row counts as free once `expires_at <= now`). */
const EXPIRY_SLACK_MS = 5;

export const ROUTES: ApiRoute[] = [
  route({
    method: 'get',
    path: '/api/v1/devices',
    operationId: 'listDevices',
    summary: 'Phones this key reaches, by id, optionally filtered by a selector',
    query: ListQuery,
    status: 200,
    response: DeviceList,
    scope: 'devices:read',
    errors: ['bad_selector', 'bad_cursor', 'insufficient_scope'],
    async handle(ctx, fk, { query }) {
      const sel = [...fk.selector, ...selectorOr400(query.selector)];
      const limit: number = query.limit;
      const now = new Date();
      const items: LabelledDevice[] = [];
      let after = fromCursor(query.cursor);
      let more = true;
      // SQL filters the equality part; the rest is matched here, batch by batch, until `limit` match.
      // A full page may be followed by an empty one (the next page is not read ahead).
      while (more && items.length < limit) {
        const batch = await ctx.store.fleet.listDevices({
          accountId: fk.account.id,
          contains: containsPart(sel),
          afterId: after,
          limit: SCAN_BATCH,
        });
        more = batch.length === SCAN_BATCH;
        for (let i = 0; i < batch.length && items.length < limit; i++) {
          after = batch[i].id;
          if (matches(sel, allLabels(batch[i]))) items.push(batch[i]);
          if (items.length === limit && i < batch.length - 1) more = true;
        }
      }
      const allocated = await ctx.store.fleet.allocatedDevices(fk.account.id, now);
      const last = items[items.length - 1];
      return {
        items: await Promise.all(items.map((d) => deviceJson(ctx, d, allocated.has(d.id)))),
        next_cursor: more && last ? cursorOf(last.id) : null,
      };
    },
  }),
  route({
    method: 'get',
    path: '/api/v1/devices/{id}',
    operationId: 'getDevice',
    summary: 'One phone',
    params: Id,
    status: 200,
    response: Device,
    scope: 'devices:read',
    errors: ['device_not_found', 'insufficient_scope'],
    async handle(ctx, fk, { params }) {
      const d = await reachable(ctx, fk, params.id);
      return deviceJson(ctx, d, !!(await ctx.store.fleet.allocationOfDevice(d.id, new Date())));
    },
  }),
  route({
    method: 'patch',
    path: '/api/v1/devices/{id}',
    operationId: 'labelDevice',
    summary: 'Set (value) or remove (null) labels of a phone',
    params: Id,
    body: LabelsPatch,
    status: 200,
    response: Device,
    scope: 'devices:act', // labels decide which keys reach a phone: not a reader's to change
    errors: ['device_not_found', 'bad_label', 'insufficient_scope'],
    async handle(ctx, fk, { params, body }) {
      const d = await reachable(ctx, fk, params.id);
      const set: Record<string, string> = {};
      const remove: string[] = [];
      for (const [k, v] of Object.entries(body.labels)) {
        if (v === null) {
          if (isFactKey(k)) throw new ApiError(400, 'bad_label', `label key "${k}": the prefix is reserved`);
          // A key that could never have been set is a mistake, not a no-op (as the CLI has it).
          const problem = labelKeyProblem(k);
          if (problem) throw new ApiError(400, 'bad_label', problem);
          remove.push(k);
        } else set[k] = v;
      }
      try {
        validateLabels(set);
      } catch (err) {
        if (err instanceof LabelError) throw new ApiError(400, 'bad_label', err.message);
        throw err;
      }
      const r = await ctx.store.fleet.updateLabels(d.id, { set, remove, max: MAX_LABELS }, fk.account.id);
      if (!r.ok)
        throw r.error === 'too_many'
          ? new ApiError(400, 'bad_label', `at most ${MAX_LABELS} labels per phone (this change makes ${r.count})`)
          : new ApiError(404, 'device_not_found', `no phone ${params.id}`);
      return deviceJson(
        ctx,
        { ...d, labels: r.labels },
        !!(await ctx.store.fleet.allocationOfDevice(d.id, new Date())),
      );
    },
  }),
  route({
    method: 'delete',
    path: '/api/v1/devices/{id}',
    operationId: 'removeDevice',
    summary: 'Remove a phone: its socket closes, its keys die',
    params: Id,
    status: 204,
    scope: 'devices:act',
    errors: ['device_not_found', 'insufficient_scope'],
    async handle(ctx, fk, { params }) {
      const d = await reachable(ctx, fk, params.id);
      if (!(await ctx.store.removeDevice(d.id))) throw new ApiError(404, 'device_not_found', `no phone ${d.id}`);
      await ctx.bus.publishControl({ type: 'device_removed', deviceId: d.id }).catch(() => {});
      return undefined;
    },
  }),
  route({
    method: 'post',
    path: '/api/v1/allocations',
    operationId: 'allocate',
    summary: 'Take a free phone matching the selector, exclusively, for ttl_s seconds',
    body: AllocationRequest,
    status: 201,
    response: Allocation,
    // Holding a phone exclusively is a lease, as take_device is on the phone
    // (docs/decisions/0213-allocations-need-devices-lease.md).
    scope: 'devices:lease',
    errors: ['no_device_available', 'bad_selector', 'insufficient_scope'],
    async handle(ctx, fk, { body }) {
      let wanted;
      try {
        wanted = selectorFromObject(body.selector);
      } catch (err) {
        throw new ApiError(400, 'bad_selector', (err as Error).message);
      }
      const started = performance.now();
      const until = Date.now() + body.wait_s * 1000;
      const waiters = poolWaiters(ctx);
      for (let woken = false; ; woken = true) {
        // Read before looking, so a phone freed while this looks wakes the wait below at once.
        const seen = waiters?.generation(fk.account.id) ?? 0;
        if (woken) await stillAllowed(ctx, fk);
        const a = await allocate(ctx, fk, wanted, body.ttl_s * 1000, { includeOffline: body.include_offline });
        if (a) {
          fleetMetrics.allocations.inc({ outcome: 'allocated' });
          fleetMetrics.allocationWait.observe((performance.now() - started) / 1000);
          return allocationJson(ctx, a);
        }
        const left = until - Date.now();
        if (left <= 0 || !waiters) break;
        // Woken by a release, revocation or phone coming online anywhere in the cluster, or
        // at the account's next expiry; the fallback re-check bounds a lost announcement.
        const next = await ctx.store.fleet.nextAllocationExpiry(fk.account.id, new Date());
        const toExpiry = next ? next.getTime() - Date.now() + EXPIRY_SLACK_MS : Infinity;
        fleetMetrics.allocationWaiting.inc();
        await waiters
          .wait(fk.account.id, seen, Math.min(left, toExpiry, WAIT_FALLBACK_MS))
          .finally(() => fleetMetrics.allocationWaiting.dec());
      }
      fleetMetrics.allocations.inc({ outcome: 'none_available' });
      throw new ApiError(
        409,
        'no_device_available',
        `no ${body.include_offline ? '' : 'online '}phone matching "${shown(formatSelector([...fk.selector, ...wanted]), 256)}" is free; retry later or widen the selector`,
        { 'Retry-After': '1' },
      );
    },
  }),
  route({
    method: 'get',
    path: '/api/v1/allocations',
    operationId: 'listAllocations',
    summary: 'Live allocations held by this key',
    status: 200,
    response: z.object({ items: z.array(Allocation) }).meta({ id: 'AllocationList' }),
    scope: 'devices:lease',
    errors: ['insufficient_scope'],
    async handle(ctx, fk) {
      const list = await ctx.store.fleet.listAllocations({ keyId: fk.key.id }, new Date());
      return { items: list.map((a) => allocationJson(ctx, a)) };
    },
  }),
  route({
    method: 'post',
    path: '/api/v1/allocations/{id}/renew',
    operationId: 'renewAllocation',
    summary: 'Renew a live allocation: it ends ttl_s from now (default: as long as its last term)',
    params: Id,
    body: Renew,
    status: 200,
    response: Allocation,
    scope: 'devices:lease',
    errors: ['allocation_not_found', 'insufficient_scope'],
    async handle(ctx, fk, { params, body }) {
      const now = new Date();
      const a = await ctx.store.fleet.getAllocation(params.id, now);
      if (!a || a.keyId !== fk.key.id) throw allocationNotFound(params.id);
      // A phone that left the key's selector is no longer this key's to hold.
      await reachable(ctx, fk, a.deviceId).catch(() => {
        throw allocationNotFound(params.id);
      });
      const ttl = body.ttl_s ?? (a.expiresAt.getTime() - a.createdAt.getTime()) / 1000;
      const renewed = await ctx.store.fleet.renewAllocation(a.id, fk.key.id, new Date(now.getTime() + ttl * 1000), now);
      if (!renewed) throw allocationNotFound(params.id);
      return allocationJson(ctx, renewed);
    },
  }),
  route({
    method: 'delete',
    path: '/api/v1/allocations/{id}',
    operationId: 'releaseAllocation',
    summary: 'Give a live allocation’s phone back to the pool (an expired or released one is allocation_not_found)',
    params: Id,
    status: 204,
    scope: 'devices:lease',
    errors: ['allocation_not_found', 'insufficient_scope'],
    async handle(ctx, fk, { params }) {
      if (!(await ctx.store.fleet.releaseAllocation(params.id, fk.key.id, new Date())))
        throw allocationNotFound(params.id);
      fleetMetrics.releases.inc();
      announce(ctx, { event: 'freed', accountId: fk.account.id });
      return undefined;
    },
  }),
  route({
    method: 'get',
    path: '/api/v1/keys',
    operationId: 'listKeys',
    summary: "The account's device keys and fleet keys (never their secrets)",
    status: 200,
    response: z.object({ items: z.array(Key) }).meta({ id: 'KeyList' }),
    scope: 'devices:read',
    errors: ['insufficient_scope', 'account_key_required'],
    async handle(ctx, fk) {
      needAccountWide(fk, 'listing keys');
      const [tokens, fleet] = await Promise.all([
        deviceKeys(ctx, fk.account.id),
        ctx.store.fleet.listKeys(fk.account.id),
      ]);
      return {
        items: [
          ...tokens.map((t) => ({
            id: t.id,
            kind: 'device' as const,
            device_id: t.deviceId,
            selector: null,
            scopes: t.scopes,
            created_at: t.createdAt.toISOString(),
          })),
          ...fleet.map((k) => ({
            id: k.id,
            kind: 'fleet' as const,
            device_id: null,
            selector: k.selector,
            scopes: k.scopes,
            created_at: k.createdAt.toISOString(),
          })),
        ],
      };
    },
  }),
  route({
    method: 'post',
    path: '/api/v1/keys',
    operationId: 'createDeviceKey',
    summary: "A device key for one of the account's phones (scopes within this key's)",
    body: KeyCreate,
    status: 201,
    response: KeyCreated,
    scopeRule: 'every scope it gives the new key, all of its own by default',
    errors: ['device_not_found', 'insufficient_scope', 'account_key_required', 'limit_reached'],
    async handle(ctx, fk, { body }) {
      const d = await reachable(ctx, fk, body.device_id);
      const scopes: Scope[] = body.scopes ?? fk.key.scopes;
      for (const s of scopes) needScope(fk, s);
      // A device key reaches its phone whatever the labels: only a key that reaches every phone
      // may mint one (docs/decisions/0175-api-v1.md).
      needAccountWide(fk, 'creating keys');
      const token = newApiToken();
      const r = await ctx.store.createToken({
        id: newId('key'),
        accountId: fk.account.id,
        deviceId: d.id,
        hash: sha256Hex(token),
        scopes,
        via: 'key',
      });
      if (!r.ok)
        throw r.error === 'limit_reached'
          ? new ApiError(403, 'limit_reached', 'the account is at its plan limit for keys')
          : new ApiError(404, 'device_not_found', `no phone ${d.id}`);
      return { id: r.token.id, token, device_id: d.id, scopes };
    },
  }),
  route({
    method: 'delete',
    path: '/api/v1/keys/{id}',
    operationId: 'revokeKey',
    summary:
      'Revoke a device key or fleet key; what it holds ends on every node (an OAuth access token is no key: key_not_found)',
    params: Id,
    status: 204,
    scopeRule: 'every scope of the key it revokes',
    errors: ['key_not_found', 'insufficient_scope', 'account_key_required'],
    async handle(ctx, fk, { params }) {
      needAccountWide(fk, 'revoking keys');
      const id: string = params.id;
      const token = (await deviceKeys(ctx, fk.account.id)).find((t) => t.id === id);
      const fleet = token ? undefined : await ctx.store.fleet.getKey(id);
      if (!token && (!fleet || fleet.accountId !== fk.account.id))
        throw new ApiError(404, 'key_not_found', `no key ${id} in this account`);
      needScopesOf(fk, (token ?? fleet)!);
      const ok = token ? await ctx.store.revokeToken(id) : await ctx.store.fleet.revokeKey(id);
      if (!ok) throw new ApiError(404, 'key_not_found', `no key ${id}`);
      await ctx.bus.publishControl({ type: 'token_revoked', tokenId: id }).catch(() => {});
      return undefined;
    },
  }),
  route({
    method: 'get',
    path: '/api/v1/enrollments',
    operationId: 'listEnrollments',
    summary: "The account's enrollment codes (never the codes themselves)",
    status: 200,
    response: z.object({ items: z.array(Enrollment) }).meta({ id: 'EnrollmentList' }),
    scope: 'devices:read',
    errors: ['insufficient_scope', 'account_key_required'],
    async handle(ctx, fk) {
      needAccountWide(fk, 'enrollment codes');
      return { items: (await ctx.store.fleet.listEnrollments(fk.account.id)).map((e) => enrollmentJson(e)) };
    },
  }),
  route({
    method: 'post',
    path: '/api/v1/enrollments',
    operationId: 'createEnrollment',
    summary: 'One code that pairs up to max_phones phones through /pair',
    body: EnrollmentCreate,
    status: 201,
    response: EnrollmentCreated,
    // Adding phones mirrors removing one (devices:act, docs/decisions/0175-api-v1.md), and the
    // code's labels decide which keys reach them (docs/decisions/0244-key-and-enrollment-routes-need-scopes.md).
    scope: 'devices:act',
    errors: ['insufficient_scope', 'account_key_required', 'bad_label'],
    async handle(ctx, fk, { body }) {
      needAccountWide(fk, 'enrollment codes');
      try {
        const e = await createEnrollment(ctx.store, {
          accountId: fk.account.id,
          maxPhones: body.max_phones,
          expiresMs: body.expires_s * 1000,
          labels: body.labels,
          namePrefix: body.name_prefix ?? null,
          relay: ctx.config.publicUrl,
          fp: ctx.fingerprint,
        });
        return { id: e.id, code: e.code, qr: e.qr };
      } catch (err) {
        if (err instanceof LabelError) throw new ApiError(400, 'bad_label', err.message);
        throw err;
      }
    },
  }),
  route({
    method: 'delete',
    path: '/api/v1/enrollments/{id}',
    operationId: 'revokeEnrollment',
    summary: 'The code stops pairing at once; phones it paired stay',
    params: Id,
    status: 204,
    scope: 'devices:act',
    errors: ['enrollment_not_found', 'insufficient_scope', 'account_key_required'],
    async handle(ctx, fk, { params }) {
      needAccountWide(fk, 'enrollment codes');
      const e = await ctx.store.fleet.getEnrollment(params.id);
      if (!e || e.accountId !== fk.account.id || !(await ctx.store.fleet.revokeEnrollment(e.id, new Date())))
        throw new ApiError(404, 'enrollment_not_found', `no active enrollment ${params.id} in this account`);
      return undefined;
    },
  }),
];

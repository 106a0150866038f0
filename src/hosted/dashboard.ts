// The dashboard: server-rendered, usable without JavaScript. Every action is a POST with the
// session cookie, the CSRF token and a same-origin check, and touches only rows of the signed-in
// account. Changes go through the store, which journals them for every node (src/gateway/node.ts).
import type { GatewayContext } from '../gateway/context.ts';
import { SCOPES, type Account, type ControlEvent, type Scope } from '../store/types.ts';
import { createKey, createPairing } from '../provisioning.ts';
import { handle, type HostedRequest, type HostedRoutes } from './request.ts';
import { qrDataUri } from './qr.ts';
import { esc, hashSecret, hidden, seal, SESSION_COOKIE, setCookie, unseal } from './web.ts';
import { factLabels, formatSelector, LabelError, matches, parseSelector, type Selector } from '../fleet/labels.ts';
import { COUNTDOWN_JS, FAVICON_SVG, PAIRING_JS, STYLE_CSS } from './assets.ts';
import { activeClients, windowText, type ActiveClient } from './active-clients.ts';

export interface DashboardOptions {
  /**
   * A phone's MCP session counts as an active client when it was used within this window
   * (default ACTIVE_WINDOW_MS; docs/decisions/0169-active-clients.md).
   */
  activeClientWindowMs?: number;
}

/** Ten minutes: longer than an agent's pause between calls, far shorter than the 24 h session expiry. */
export const ACTIVE_WINDOW_MS = 10 * 60_000;

export function registerDashboardRoutes(app: HostedRoutes, ctx: GatewayContext, opts: DashboardOptions = {}): void {
  const windowMs = opts.activeClientWindowMs ?? ACTIVE_WINDOW_MS;
  app.get(
    '/account/assets/style.css',
    handle(ctx, (r) => r.send(200, asset('text/css'), STYLE_CSS)),
  );
  app.get(
    '/account/assets/countdown.js',
    handle(ctx, (r) => r.send(200, asset('text/javascript'), COUNTDOWN_JS)),
  );
  app.get(
    '/account/assets/pairing.js',
    handle(ctx, (r) => r.send(200, asset('text/javascript'), PAIRING_JS)),
  );
  for (const path of ['/favicon.ico', '/account/assets/icon.svg'])
    app.get(
      path,
      handle(ctx, (r) => r.send(200, asset('image/svg+xml'), FAVICON_SVG)),
    );
  app.get(
    '/account',
    handle(ctx, (r) => signedIn(r, (a) => dashboard(r, a, windowMs))),
  );
  app.get(
    '/account/phones.json',
    handle(ctx, (r) => phonesJson(r)),
  );
  app.post(
    '/account/pair',
    handle(ctx, (r) => action(r, (a, f) => pair(r, a, f)), { body: true }),
  );
  app.post(
    '/account/phones/remove',
    handle(ctx, (r) => action(r, (a, f) => removePhone(r, a, f)), { body: true }),
  );
  app.post(
    '/account/keys',
    handle(ctx, (r) => action(r, (a, f) => createApiKey(r, a, f, windowMs)), { body: true }),
  );
  app.get(
    '/account/keys/created',
    handle(ctx, (r) => signedIn(r, (a) => keyCreated(r, a))),
  );
  app.post(
    '/account/keys/revoke',
    handle(ctx, (r) => action(r, (a, f) => revokeKey(r, a, f)), { body: true }),
  );
  app.post(
    '/account/connections/revoke',
    handle(ctx, (r) => action(r, (a, f) => revokeConnection(r, a, f)), { body: true }),
  );
}

/**
 * Any other path under /account/ (`/account/` with its slash, a mistyped link) is a page like the
 * others: an HTML 404 with the pages' headers, not the gateway's JSON 404 for unknown endpoints
 * (src/gateway/node.ts). Registered last; the router prefers every exact path to it.
 */
export function registerAccountNotFound(app: HostedRoutes, ctx: GatewayContext): void {
  app.otherMethods(
    '/account/*',
    handle(ctx, (r) =>
      r.page(
        404,
        'Not found',
        '<p class="error" role="alert">There is no such page.</p><p><a href="/account">Back to your phones</a></p>',
      ),
    ),
  );
}

const asset = (type: string) => ({
  'Content-Type': `${type}; charset=utf-8`,
  'Cache-Control': 'max-age=300',
  'X-Content-Type-Options': 'nosniff',
});

/**
 * The store journalled the change (every node reads it within --control-poll-ms); the bus
 * brings it to every node now. A bus failure is harmless: the journal still delivers it.
 */
async function announce(r: HostedRequest, event: ControlEvent): Promise<void> {
  await r.ctx.bus.publishControl(event).catch(() => {});
}

/** Whether a phone is connected, as far as this node can tell right now. */
type Presence = 'online' | 'offline' | 'unknown';

/**
 * Cluster-wide from the bus. Without the bus (a Redis outage) a phone whose socket is on this node
 * is still online, and any other is unknown, never offline: an outage of Redis never reports a
 * connected phone offline (docs/decisions/0210-no-phone-offline-because-redis-was-down.md).
 */
function presence(r: HostedRequest, deviceId: string): Promise<Presence> {
  return r.ctx.bus.ownerOf(deviceId).then(
    (o): Presence => (o ? 'online' : 'offline'),
    (): Presence => (r.ctx.hub.device(deviceId) ? 'online' : 'unknown'),
  );
}

/** The account's phones for the pairing page's watcher: id, name, online. Signed out: 401. */
async function phonesJson(r: HostedRequest): Promise<void> {
  const account = await r.account();
  if (!account) return r.jsonResponse(401, { error: 'signed_out' });
  const devices = await r.ctx.store.listDevices(account.id);
  const online = await Promise.all(devices.map((d) => presence(r, d.id)));
  r.jsonResponse(
    200,
    devices.map((d, i) => ({
      id: d.id,
      name: d.name,
      online: online[i] === 'unknown' ? 'unknown' : online[i] === 'online',
    })),
  );
}

async function signedIn(r: HostedRequest, fn: (a: Account) => Promise<void>): Promise<void> {
  const account = await r.account();
  if (!account) {
    // Back to the dashboard after sign-in with its query (a filtered list), as the consent page
    // keeps its own (src/hosted/oauth.ts); web.ts safeNext keeps `next` under /account.
    const query = r.query.toString();
    return r.redirect(`/account/signin?next=${encodeURIComponent(query ? `/account?${query}` : '/account')}`);
  }
  await fn(account);
}

async function action(r: HostedRequest, fn: (a: Account, form: URLSearchParams) => Promise<void>): Promise<void> {
  const form = await r.checkStateChange();
  if (!form) return;
  const account = await r.account();
  if (!account) return r.redirect('/account/signin?next=/account');
  await fn(account, form);
}

/** The distinct hosts of redirect URIs: where a connection's codes went. */
function hostsOf(uris: string[]): string {
  const hosts = new Set<string>();
  for (const u of uris) {
    try {
      hosts.add(new URL(u).host);
    } catch {
      // stored URIs are valid; nothing to show otherwise
    }
  }
  return [...hosts].join(', ') || '—';
}

const label = (email: string | null, id: string) => email ?? id;
const when = (d: Date | null) => (d ? `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC` : 'never');

/** Sessions read per phone for its active clients (the most recently used first). */
const SESSIONS_READ = 200;

/** A phone's active clients as a table cell: how many, then each with its latest request. */
function clientsCell(clients: ActiveClient[] | undefined, capped: boolean): string {
  if (!clients) return '—';
  const items = clients
    .map(
      (c) =>
        `<li><span data-testid="client-name">${esc(c.name)}${c.version ? ` ${esc(c.version)}` : ''}</span> <span class="muted">last request ${esc(new Date(c.lastSeenAt).toISOString().slice(11, 19))} UTC${c.sessions > 1 ? ` · ${c.sessions} sessions` : ''}</span></li>`,
    )
    .join('');
  return `<span data-testid="active-clients">${capped ? '≥ ' : ''}${clients.length}</span>${items ? `<ul class="clients">${items}</ul>` : ''}`;
}

async function dashboard(r: HostedRequest, account: Account, windowMs: number, notice?: string): Promise<void> {
  const { store, bus } = r.ctx;
  const [allDevices, tokens, grants, labelled, fleetKeys] = await Promise.all([
    store.listDevices(account.id),
    store.listTokens({ accountId: account.id }),
    store.hosted.listOAuthGrants(account.id),
    store.fleet.listDevices({ accountId: account.id }),
    store.fleet.listKeys(account.id),
  ]);
  // The phone list filtered by a selector, parsed by the same code as /api/v1 and the CLI.
  const labelsOf = new Map(labelled.map((d) => [d.id, d.labels]));
  const selectorText = (r.query.get('selector') ?? '').trim();
  let selector: Selector = [];
  let selectorError = '';
  try {
    selector = parseSelector(selectorText);
  } catch (err) {
    if (!(err instanceof LabelError)) throw err;
    selectorError = err.message;
  }
  const devices = allDevices.filter((d) =>
    matches(selector, { ...(labelsOf.get(d.id) ?? {}), ...factLabels(d.initResult) }),
  );
  const online = await Promise.all(devices.map((d) => presence(r, d.id)));
  // MCP clients of each phone: its sessions used within the window, on every node (the bus holds
  // them); a session idle longer still exists (24 h) but is not a client someone is running now.
  const now = Date.now();
  const sessions = await Promise.all(
    devices.map((d) => bus.sessions.listForDevice(d.id, SESSIONS_READ).catch(() => undefined)),
  );
  const clients = sessions.map((list) => (list ? activeClients(list, now, windowMs) : undefined));
  const capped = sessions.map(
    (list) => !!list && list.length === SESSIONS_READ && list.every((x) => x.lastSeenAt >= now - windowMs),
  );
  const keys = tokens.filter((t) => t.via === 'key');
  const names = new Map(allDevices.map((d) => [d.id, d.name]));
  const csrf = r.csrf();
  const csrfField = hidden('csrf', csrf);
  const cap = (n: number | null) => (n === null ? 'unlimited' : String(n));

  const phoneRows = devices
    .map((d, i) => {
      const init = d.initResult as { serverInfo?: { name?: string; version?: string } } | null;
      return `<tr><td>${esc(d.name)}<div class="muted">${esc(d.id)}</div></td>
<td class="${online[i]}">${online[i]}</td>
<td>${online[i] === 'online' ? 'now' : esc(when(d.lastSeenAt))}</td><td>${esc(init?.serverInfo?.version ?? '—')}</td><td>${clientsCell(clients[i], capped[i])}</td>
<td data-testid="phone-labels">${labelChips(labelsOf.get(d.id) ?? {})}</td>
<td><form method="post" action="/account/phones/remove" class="inline">${csrfField}${hidden('device', d.id)}<button type="submit" aria-label="Remove ${esc(d.name)}">Remove</button></form></td></tr>`;
    })
    .join('');
  const keyRows = keys
    .map(
      (
        k,
      ) => `<tr><td>${esc(k.id)}</td><td>${esc(names.get(k.deviceId) ?? k.deviceId)}</td><td>${esc(k.scopes.join(' '))}</td><td>${esc(when(k.createdAt))}</td>
<td><form method="post" action="/account/keys/revoke" class="inline">${csrfField}${hidden('key', k.id)}<button type="submit" aria-label="Revoke key ${esc(k.id)} for ${esc(names.get(k.deviceId) ?? k.deviceId)}">Revoke</button></form></td></tr>`,
    )
    .join('');
  const fleetKeyRows = fleetKeys
    .map(
      (
        k,
      ) => `<tr><td>${esc(k.id)}<div class="muted">fleet key</div></td><td data-testid="fleet-key-selector">${k.selector ? `phones matching <code>${esc(k.selector)}</code>` : 'every phone'}</td><td>${esc(k.scopes.join(' '))}</td><td>${esc(when(k.createdAt))}</td>
<td><form method="post" action="/account/keys/revoke" class="inline">${csrfField}${hidden('key', k.id)}<button type="submit" aria-label="Revoke fleet key ${esc(k.id)}">Revoke</button></form></td></tr>`,
    )
    .join('');
  const grantRows = grants
    .map(
      (
        g,
      ) => `<tr><td>connected via OAuth: <strong>${esc(g.clientName)}</strong><div class="muted" data-testid="grant-client">${esc(g.clientId)} · to ${esc(hostsOf(g.redirectUris ?? []))}</div></td><td>${esc(names.get(g.deviceId) ?? g.deviceId)}</td><td>${esc(g.scopes.join(' '))}</td><td>${esc(when(g.createdAt))}</td><td data-testid="grant-last-use">${esc(when(g.lastUsedAt ?? null))}</td>
<td><form method="post" action="/account/connections/revoke" class="inline">${csrfField}${hidden('grant', g.id)}<button type="submit" aria-label="Revoke ${esc(g.clientName)} on ${esc(names.get(g.deviceId) ?? g.deviceId)}">Revoke</button></form></td></tr>`,
    )
    .join('');
  const phoneOptions = allDevices.map((d) => `<option value="${esc(d.id)}">${esc(d.name)}</option>`).join('');
  const scopeBoxes = SCOPES.map(
    (s) => `<label><input type="checkbox" name="scope" value="${s}" checked> ${s}</label>`,
  ).join(' ');

  r.page(
    200,
    'Your phones',
    `${notice ? `<p role="status">${esc(notice)}</p>` : ''}
${account.locked ? '<p class="error" role="alert">This account has no active subscription: clients get 402 until it is renewed. Phones and keys are kept.</p>' : ''}
<section aria-labelledby="plan-h"><h2 id="plan-h">Plan and usage</h2>
<p>Phones: ${allDevices.length} of ${cap(account.maxDevices)} · API keys, fleet keys and OAuth connections: ${keys.length + fleetKeys.length + grants.length} of ${cap(account.maxKeys)}</p></section>

<section aria-labelledby="phones-h"><h2 id="phones-h">Phones</h2>
<form method="get" action="/account" role="search"><label for="selector">Labels</label> <input id="selector" name="selector" type="text" maxlength="2000" value="${esc(selectorText)}" placeholder="site=berlin,model in (pixel7,pixel8)"> <button type="submit">Filter</button></form>
${selectorError ? `<p class="error" role="alert" data-testid="selector-error">Not a selector (bad_selector): ${esc(selectorError)}</p>` : ''}
${selector.length ? `<p class="muted" data-testid="selector-shown">${devices.length} of ${allDevices.length} phones match <code>${esc(formatSelector(selector))}</code>.</p>` : ''}
${devices.length ? `<table><thead><tr><th>Name</th><th>Status</th><th>Last seen</th><th>App version</th><th>Clients active in the last ${esc(windowText(windowMs))}</th><th>Labels</th><th></th></tr></thead><tbody>${phoneRows}</tbody></table>` : allDevices.length ? '<p class="muted">No phone matches.</p>' : '<p class="muted">No phone yet.</p>'}
<form method="post" action="/account/pair">${csrfField}
<label for="phone-name">Phone name</label> <input id="phone-name" name="name" type="text" maxlength="100">
<button type="submit" class="primary">Pair a phone</button></form></section>

<section aria-labelledby="keys-h"><h2 id="keys-h">API keys</h2>
${keys.length + fleetKeys.length ? `<table><thead><tr><th>Key</th><th>Phone</th><th>Scopes</th><th>Created</th><th></th></tr></thead><tbody>${keyRows}${fleetKeyRows}</tbody></table>` : '<p class="muted">No API key.</p>'}
${
  // Every phone of the account can get a key: the selector filters the list above, not this.
  allDevices.length
    ? `<form method="post" action="/account/keys">${csrfField}
<label for="key-phone">Phone</label> <select id="key-phone" name="device">${phoneOptions}</select>
<fieldset><legend>Scopes</legend>${scopeBoxes}</fieldset>
<button type="submit" class="primary">Create key</button></form>`
    : '<p class="muted">Pair a phone to create a key for it.</p>'
}</section>

<section aria-labelledby="oauth-h"><h2 id="oauth-h">OAuth connections</h2>
${grants.length ? `<table><thead><tr><th>Client</th><th>Phone</th><th>Scopes</th><th>Since</th><th>Last token</th><th></th></tr></thead><tbody>${grantRows}</tbody></table>` : '<p class="muted">No client connected via OAuth.</p>'}
<p class="muted">Clients that connect by URL (MCP authorization) appear here. MCP URL: <code>${esc(r.ctx.config.publicUrl)}/mcp</code></p></section>`,
    { signedIn: label(account.email, account.id) },
  );
}

async function pair(r: HostedRequest, account: Account, form: URLSearchParams): Promise<void> {
  const name = (form.get('name') ?? '').trim().slice(0, 100) || null;
  let qr;
  try {
    qr = await createPairing(r.ctx.store, {
      accountId: account.id,
      name,
      relay: r.ctx.config.publicUrl,
      fp: r.ctx.fingerprint,
    });
  } catch (err) {
    if (!/plan limit/.test(String(err))) throw err;
    return r.page(
      403,
      'Plan limit reached',
      '<p class="error" role="alert">The account is at its plan limit for phones (limit_reached). Remove a phone or change the plan.</p><p><a href="/account">Back</a></p>',
      { signedIn: label(account.email, account.id) },
    );
  }
  const expires = new Date(Date.now() + 10 * 60_000);
  const known = (await r.ctx.store.listDevices(account.id)).map((d) => d.id);
  const payload = JSON.stringify(qr);
  r.page(
    200,
    'Pair a phone',
    `<p>Scan this with the phonebridge app, or type the code.</p>
<img class="qr" alt="Pairing QR code" src="${qrDataUri(payload)}">
<p>Code: <span class="code" data-testid="pairing-code">${esc(qr.code)}</span></p>
<p>Or run a reference phone with this payload (<code>phonebridge device run --state ./phone --pair '…'</code>):</p>
<pre class="payload" id="pair-payload" data-testid="pairing-payload">${esc(payload)}</pre>
<button type="button" data-copy="pair-payload">Copy</button>
<p>Valid once, for ten minutes: until ${esc(expires.toISOString().slice(11, 16))} UTC (<span data-expires="${esc(expires.toISOString())}">10:00 left</span>).</p>
<p role="status" data-testid="pairing-status" data-known-devices="${esc(JSON.stringify(known))}">Waiting for the phone… <a href="/account">Show my phones</a></p>`,
    {
      signedIn: label(account.email, account.id),
      head: '<script src="/account/assets/countdown.js" defer></script><script src="/account/assets/pairing.js" defer></script>',
    },
  );
}

async function removePhone(r: HostedRequest, account: Account, form: URLSearchParams): Promise<void> {
  const device = await r.ctx.store.getDevice(form.get('device') ?? '');
  // Another account's phone looks exactly like a missing one.
  if (device && device.accountId === account.id && (await r.ctx.store.removeDevice(device.id)))
    await announce(r, { type: 'device_removed', deviceId: device.id });
  r.redirect('/account');
}

async function createApiKey(
  r: HostedRequest,
  account: Account,
  form: URLSearchParams,
  windowMs: number,
): Promise<void> {
  const device = await r.ctx.store.getDevice(form.get('device') ?? '');
  const scopes: Scope[] = SCOPES.filter((s) => form.getAll('scope').includes(s));
  const signedIn = { signedIn: label(account.email, account.id) };
  if (!device || device.accountId !== account.id) return dashboard(r, account, windowMs, 'No such phone.');
  if (scopes.length === 0) return dashboard(r, account, windowMs, 'Pick at least one scope.');
  let key;
  try {
    key = await createKey(r.ctx.store, device.id, scopes);
  } catch (err) {
    if (!/plan limit/.test(String(err))) throw err;
    return r.page(
      403,
      'Plan limit reached',
      '<p class="error" role="alert">The account is at its plan limit for API keys, fleet keys and OAuth connections together (limit_reached). Revoke one or change the plan.</p><p><a href="/account">Back</a></p>',
      signedIn,
    );
  }
  // Post/Redirect/Get: the token goes to the page after a 303, so a reload or a step through the
  // history repeats the GET, not this POST (docs/decisions/0253-key-created-page-after-a-redirect.md).
  const shown: NewKey = { account: account.id, id: key.id, token: key.token, phone: device.name, scopes };
  r.cookie(
    setCookie(NEW_KEY_COOKIE, seal(r.cookies[SESSION_COOKIE], NEW_KEY_COOKIE, shown, NEW_KEY_TTL_MS), {
      secure: r.secure,
      maxAgeS: NEW_KEY_TTL_MS / 1000,
    }),
  );
  r.redirect('/account/keys/created');
}

/**
 * Carries a new key's token from `POST /account/keys` to the one page that shows it: sealed
 * under the session (web.ts seal), so any node can read it and only this browser's session can.
 */
const NEW_KEY_COOKIE = 'pb_newkey';
/** The redirect is followed at once; a minute covers a slow answer, not a later visit. */
const NEW_KEY_TTL_MS = 60_000;
interface NewKey {
  account: string;
  id: string;
  token: string;
  phone: string;
  scopes: string[];
}

/** `GET /account/keys/created`: the new key's token, once; a reload shows it no more. */
async function keyCreated(r: HostedRequest, account: Account): Promise<void> {
  const signedIn = { signedIn: label(account.email, account.id) };
  const sealed = r.cookies[NEW_KEY_COOKIE];
  let key: NewKey | undefined;
  if (sealed) {
    // Cleared by this answer whatever it shows: a reload finds nothing to show.
    r.cookie(setCookie(NEW_KEY_COOKIE, '', { secure: r.secure, maxAgeS: 0 }));
    const found = unseal(r.cookies[SESSION_COOKIE], NEW_KEY_COOKIE, sealed) as NewKey | undefined;
    // Once across the cluster too: a copy of the cookie sent again within its minute (a second
    // tab, a request raced with this one) counts past 1 on the bus, whichever node it reaches.
    // Without the bus the cleared cookie is the guard; the person who made the key still gets it.
    const first =
      found?.account === account.id &&
      (await r.ctx.bus.hit(`new-key:${hashSecret(NEW_KEY_COOKIE, sealed)}`, NEW_KEY_TTL_MS).then(
        (n) => n === 1,
        () => true,
      ));
    if (first) key = found;
  }
  if (!key)
    return r.page(
      200,
      'Key created',
      `<p>A new key's token is shown once, on the page right after <strong>Create key</strong>, and not again. If it was not copied, revoke that key and create another.</p>
<p><a href="/account">Back to your phones</a></p>`,
      signedIn,
    );
  r.page(
    200,
    'Key created',
    `<p>Key <strong>${esc(key.id)}</strong> for ${esc(key.phone)} (${esc(key.scopes.join(' '))}). Copy it now: it is shown only once.</p>
<p class="secret" data-testid="new-key">${esc(key.token)}</p>
<p>Send it as <code>X-Api-Key</code> or <code>Authorization: Bearer</code> to <code>${esc(r.ctx.config.publicUrl)}/mcp</code>.</p>
<p><a href="/account">Back to your phones</a></p>`,
    signedIn,
  );
}

async function revokeKey(r: HostedRequest, account: Account, form: URLSearchParams): Promise<void> {
  const id = form.get('key') ?? '';
  const key = (await r.ctx.store.listTokens({ accountId: account.id })).find((t) => t.id === id && t.via === 'key');
  if (key && (await r.ctx.store.revokeToken(id))) {
    await announce(r, { type: 'token_revoked', tokenId: id });
    await announce(r, { type: 'credential_revoked', credential: id, deviceId: key.deviceId });
  } else if (!key) {
    // A fleet key: the store journals its revocation for every phone it was used on.
    const fleet = await r.ctx.store.fleet.getKey(id);
    if (fleet?.accountId === account.id && (await r.ctx.store.fleet.revokeKey(id)))
      await announce(r, { type: 'token_revoked', tokenId: id });
  }
  r.redirect('/account');
}

/** Hand-set labels as `key=value` chips (the phone's facts are in the other columns). */
function labelChips(labels: Record<string, string>): string {
  const entries = Object.entries(labels).sort(([a], [b]) => a.localeCompare(b));
  return entries.length
    ? entries.map(([k, v]) => `<code class="label">${esc(k)}=${esc(v)}</code>`).join(' ')
    : '<span class="muted">—</span>';
}

async function revokeConnection(r: HostedRequest, account: Account, form: URLSearchParams): Promise<void> {
  const id = form.get('grant') ?? '';
  const grant = (await r.ctx.store.hosted.listOAuthGrants(account.id)).find((g) => g.id === id);
  if (grant && (await r.ctx.store.hosted.revokeOAuthGrant(id)))
    await announce(r, { type: 'credential_revoked', credential: id, deviceId: grant.deviceId });
  r.redirect('/account');
}

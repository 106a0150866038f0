// The `phonebridge` command line: serve, pair, keys, devices, device run, demo.
import { parseArgs } from 'node:util';
import {
  ConfigError,
  decimalInteger,
  parseRelayConfig,
  publicUrlValue,
  SERVE_FLAGS,
  storeOptions,
} from '../src/config.ts';
import { UsageError } from './usage-error.ts';
import { ListenError } from '../src/gateway/listen-error.ts';
import { openStore, SchemaTooNewError, DataDirBusyError, SCOPES, type Scope, type Store } from '../src/store/index.ts';
import { createKey, createPairing } from '../src/provisioning.ts';
import { newId } from '../src/crypto/secrets.ts';
import { readRelayInfo } from './relay-info.ts';
import { DEFAULT_PLAN, normalizeEmail } from '../src/hosted/plans.ts';
import { databaseStartError } from './database-start-error.ts';
import { LabelError, MAX_LABELS, matches, parseLabelArgs, parseLabelList, parseSelector } from '../src/fleet/labels.ts';
import { allLabels } from '../src/fleet/access.ts';
import { createFleetKey } from '../src/fleet/keys.ts';
import { createEnrollment, enrollmentJson, parseDuration } from '../src/fleet/enroll.ts';

const USAGE = `phonebridge — relay MCP clients to phones

  phonebridge serve [--port 8080] [--host 127.0.0.1] [--admin-port 9464] [--public-url URL]
                    [--data-dir ./.phonebridge] [--database-url postgres://…] [--redis-url redis://…]
                    [--node-id ID] [--hosted [--smtp-url smtp://… --mail-from ADDR]] [--trust-proxy]
                    [--tls-cert F --tls-key F] [--allowed-origins a,b]
  phonebridge pair [--name N] [--account A] [--json]
  phonebridge keys create --device ID [--scopes a,b] [--json] | keys list [--json] | keys revoke ID
  phonebridge keys create --fleet [--selector k=v,…] [--scopes a,b] [--account A] [--json]
  phonebridge devices list [--selector k=v,…] [--json] | devices remove ID
  phonebridge devices label ID k=v … [k-]
  phonebridge enroll create --max-phones N --expires 7d [--labels k=v,…] [--name-prefix P] [--account A] --json
  phonebridge enroll list [--json] | enroll revoke ID
  phonebridge accounts list [--json] | accounts create --email E [--phones N] [--keys N] [--json]
  phonebridge accounts plan ACCOUNT --phones N|unlimited --keys N|unlimited
  phonebridge accounts lock ACCOUNT | accounts unlock ACCOUNT     (ACCOUNT: an id or an email)
  phonebridge device run --state DIR [--pair '<QR payload JSON>'] [--backend sim|bridge] [--name N]
                    [--upstream-cmd "CMD" | --upstream-url URL] [--scope-map FILE]   (with --backend bridge)
  phonebridge demo     (what npm start runs: relay + one simulated phone + a key)

Every command takes --data-dir / --database-url like serve (or PHONEBRIDGE_DATA_DIR / PHONEBRIDGE_DATABASE_URL):
pair, keys, devices, enroll and accounts work on that database; demo takes every serve flag; device run opens
no database and ignores them (its phone lives in --state), but refuses a --database-url that is no postgres:// URL
as they do.
A command that takes an ID or ACCOUNT takes one (a second is refused). Numbers are decimal integers.
\`phonebridge serve --help\` lists every serve flag.`;

/** Every serve flag, from the one list parseRelayConfig reads (src/config.ts), wrapped to 100 columns. */
function serveFlagsHelp(): string {
  const wrap = (words: string[]): string => {
    const lines: string[] = [];
    for (const w of words) {
      const last = lines.length - 1;
      if (last >= 0 && lines[last].length + 1 + w.length <= 96) lines[last] += ` ${w}`;
      else lines.push(w);
    }
    return lines.map((l) => `    ${l}`).join('\n');
  };
  const valued = SERVE_FLAGS.filter((f) => !f.switch).map((f) => `--${f.name}`);
  const switches = SERVE_FLAGS.filter((f) => f.switch).map((f) => `--${f.name}`);
  return `serve flags. Each has an environment twin PHONEBRIDGE_<FLAG> (--max-batch → PHONEBRIDGE_MAX_BATCH);
docs/OPERATIONS.md says what each does and its default ("phonebridge serve flags", "Budgets per key and per node").

  with a value (--flag VALUE):
${wrap(valued)}
  switches (no value; in the environment true/false, 1/0 or yes/no):
${wrap(switches)}`;
}

const STORE_FLAGS = { 'data-dir': { type: 'string' }, 'database-url': { type: 'string' } } as const;

export async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  // Every command's --help is the usage (its own option parser would call it unknown first).
  if (cmd !== undefined && (rest.includes('--help') || rest.includes('-h'))) {
    console.log(cmd === 'serve' ? `${USAGE}\n\n${serveFlagsHelp()}` : USAGE);
    return;
  }
  try {
    switch (cmd) {
      case 'serve':
        // Loaded for serve alone: the one-shot commands start without the relay's modules.
        return await (await import('./serve.ts')).serve(parseRelayConfig(rest));
      case 'demo':
        return await (await import('./demo.ts')).demo(rest);
      case 'pair':
        return await pairCommand(rest);
      case 'keys':
        return await keysCommand(rest);
      case 'devices':
        return await devicesCommand(rest);
      case 'accounts':
        return await accountsCommand(rest);
      case 'enroll':
        return await enrollCommand(rest);
      case 'device':
        return await (await import('./device-run.ts')).deviceCommand(rest);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        console.log(USAGE);
        return;
      default:
        throw new UsageError(`unknown command "${cmd}"`);
    }
  } catch (err) {
    // Not a usage mistake: the error says all there is (no usage after it).
    if (
      err instanceof SchemaTooNewError ||
      err instanceof ConfigError ||
      err instanceof ListenError ||
      err instanceof DataDirBusyError
    ) {
      console.error(`phonebridge: ${err.message}`);
      process.exit(2);
    }
    if (
      err instanceof UsageError ||
      err instanceof LabelError ||
      (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      console.error(`phonebridge: ${(err as Error).message}\n\n${USAGE}`);
      process.exit(64);
    }
    console.error(`phonebridge: ${(err as Error).message}`);
    process.exit(1);
  }
}

async function withStore<T>(values: Record<string, unknown>, fn: (store: Store) => Promise<T>): Promise<T> {
  const options = storeOptions(values);
  // A database the command cannot open is worded (and exits 2) as for serve.
  const opened = await openStore({ ...options, role: 'cli' }).catch((err: unknown) => {
    throw databaseStartError(options.databaseUrl, err);
  });
  try {
    return await fn(opened.store);
  } finally {
    await opened.close();
  }
}

async function pairCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...STORE_FLAGS,
      name: { type: 'string' },
      account: { type: 'string' },
      json: { type: 'boolean' },
      'public-url': { type: 'string' },
    },
  });
  const { relay, fp } = relayForQr(values);
  const payload = await withStore(values, async (store) =>
    createPairing(store, {
      accountId: values.account !== undefined ? await resolveAccount(store, values.account) : undefined,
      name: values.name,
      relay,
      fp,
    }),
  );
  if (values.json) {
    console.log(JSON.stringify(payload));
    return;
  }
  const { default: qrcode } = await import('qrcode-terminal');
  const text = JSON.stringify(payload);
  qrcode.generate(text, { small: true }, (qr: string) => console.log(qr));
  console.log(
    `Scan with the phonebridge app, or run a reference phone:\n  phonebridge device run --state ./phone --pair '${text}'\nThe code is valid for ten minutes, once.`,
  );
}

/**
 * The relay a QR names and serve's TLS pin for it: --public-url or PHONEBRIDGE_PUBLIC_URL read as
 * serve reads them (publicUrlValue: http(s), no trailing slash), else what serve left in relay.json.
 * The pin goes with the URL serve serves it on, only.
 */
function relayForQr(values: { 'data-dir'?: string; 'public-url'?: string }): { relay: string; fp?: string } {
  const info = readRelayInfo(storeOptions(values).dataDir);
  // Empty is unset, as for serve.
  const raw = values['public-url'] || process.env.PHONEBRIDGE_PUBLIC_URL || undefined;
  let relay = info?.publicUrl ?? 'http://127.0.0.1:8080';
  if (raw !== undefined)
    try {
      relay = publicUrlValue(raw).publicUrl;
    } catch (err) {
      // Given to this command: a usage error here (exit 64), as a bad number is.
      if (err instanceof ConfigError) throw new UsageError(`${err.message} (--public-url or PHONEBRIDGE_PUBLIC_URL)`);
      throw err;
    }
  return { relay, fp: info?.publicUrl === relay ? info.fingerprint : undefined };
}

/**
 * The one ID a command takes (positionals[0]). A second is refused rather than left alone while
 * the command reports success (`keys revoke K1 K2` revoking K1 only).
 */
function oneId(positionals: string[], command: string, what: string): string {
  const [id, ...extra] = positionals;
  if (id === undefined || id === '') throw new UsageError(`${command} needs ${what}`);
  if (extra.length > 0)
    throw new UsageError(`${command} takes one ${what}, got ${positionals.length}: run it once for each`);
  return id;
}

/** A command that takes no positional argument refuses one instead of ignoring it. */
function noArgs(positionals: string[], command: string): void {
  if (positionals.length > 0) throw new UsageError(`${command} takes no argument "${positionals[0]}"`);
}

/** A count flag: a positive decimal integer (src/config.ts decimalInteger), else a usage error. */
function countValue(flag: string, raw: string): number {
  const n = decimalInteger(raw);
  // The database keeps counts in 32-bit integer columns.
  if (n === undefined || n < 1 || n > 2 ** 31 - 1)
    throw new UsageError(`--${flag} must be a positive decimal integer (at most ${2 ** 31 - 1}), got "${raw}"`);
  return n;
}

function parseScopes(raw: string | undefined): Scope[] {
  // Only an absent flag means every scope: `--scopes ""` (an unset shell variable) is refused below.
  if (raw === undefined) return [...SCOPES];
  const list = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const s of list)
    if (!(SCOPES as readonly string[]).includes(s))
      throw new UsageError(`unknown scope "${s}"; scopes are ${SCOPES.join(', ')}`);
  if (list.length === 0) throw new UsageError('--scopes needs at least one scope');
  return [...new Set(list)] as Scope[];
}

async function keysCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      ...STORE_FLAGS,
      device: { type: 'string' },
      scopes: { type: 'string' },
      json: { type: 'boolean' },
      fleet: { type: 'boolean' },
      selector: { type: 'string' },
      account: { type: 'string' },
    },
  });
  if (sub === 'create' && values.fleet) {
    noArgs(positionals, 'keys create');
    if (values.device !== undefined) throw new UsageError('keys create: --fleet and --device exclude each other');
    // Only an absent flag means every phone of the account: `--selector ""` (an unset shell
    // variable) would widen the key from the phones meant to all of them, so it is refused.
    if (values.selector !== undefined && values.selector.trim() === '')
      throw new UsageError('keys create: --selector needs at least one requirement (omit it for every phone)');
    const scopes = parseScopes(values.scopes);
    const key = await withStore(values, async (store) =>
      createFleetKey(store, {
        accountId: values.account !== undefined ? await resolveAccount(store, values.account) : 'local',
        selector: values.selector,
        scopes,
      }),
    );
    if (values.json) console.log(JSON.stringify(key));
    else
      console.log(
        `fleet key ${key.id} for phones matching "${key.selector || '(all)'}" (${key.scopes.join(', ')})\n${key.token}\nUse it on /mcp/devices/<deviceId>. Shown once: store it now.`,
      );
    return;
  }
  if (sub === 'create') {
    noArgs(positionals, 'keys create');
    if (values.selector !== undefined) throw new UsageError('keys create: --selector needs --fleet');
    if (values.account !== undefined) throw new UsageError('keys create: --account needs --fleet');
    if (!values.device) throw new UsageError('keys create needs --device ID (or --fleet)');
    const scopes = parseScopes(values.scopes);
    const key = await withStore(values, (store) => createKey(store, values.device!, scopes));
    if (values.json) console.log(JSON.stringify(key));
    else
      console.log(
        `key ${key.id} for ${key.device_id} (${key.scopes.join(', ')})\n${key.token}\nShown once: store it now.`,
      );
    return;
  }
  if (sub === 'list') {
    noArgs(positionals, 'keys list');
    const [tokens, fleet] = await withStore(values, (store) =>
      Promise.all([
        store.listTokens(values.device ? { deviceId: values.device } : undefined),
        values.device ? [] : store.fleet.listKeys(),
      ]),
    );
    const rows: Array<Record<string, unknown> & { id: string; scopes: string[]; via: string; created_at: string }> =
      tokens.map((t) => ({
        id: t.id,
        device_id: t.deviceId,
        scopes: t.scopes,
        via: t.via,
        created_at: t.createdAt.toISOString(),
        expires_at: t.expiresAt?.toISOString() ?? null,
      }));
    for (const k of fleet)
      rows.push({
        id: k.id,
        fleet: true,
        selector: k.selector,
        account_id: k.accountId,
        scopes: k.scopes,
        via: 'fleet',
        created_at: k.createdAt.toISOString(),
      });
    if (values.json) console.log(JSON.stringify(rows));
    else
      for (const r of rows)
        console.log(
          `${r.id}  ${r.via === 'fleet' ? `fleet "${String(r.selector) || '(all)'}"` : String(r.device_id)}  ${r.scopes.join(',')}  ${r.via}  ${r.created_at}`,
        );
    return;
  }
  if (sub === 'revoke') {
    const id = oneId(positionals, 'keys revoke', 'key id');
    const ok = await withStore(values, async (store) => (await store.revokeToken(id)) || store.fleet.revokeKey(id));
    if (!ok) throw new Error(`no key "${id}"`);
    console.log(`revoked ${id}`);
    return;
  }
  throw new UsageError(`keys: expected create, list or revoke`);
}

async function devicesCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { ...STORE_FLAGS, json: { type: 'boolean' }, selector: { type: 'string' } },
  });
  if (sub === 'list') {
    noArgs(positionals, 'devices list');
    // As for `keys create --fleet`: `--selector ""` is most likely an unset shell variable, and
    // a list of every phone would answer a question nobody asked.
    if (values.selector !== undefined && values.selector.trim() === '')
      throw new UsageError('devices list: --selector needs at least one requirement (omit it for every phone)');
    const selector = parseSelector(values.selector);
    const devices = await withStore(values, (store) => store.fleet.listDevices({}));
    const rows = devices
      .filter((d) => matches(selector, allLabels(d)))
      .map((d) => ({
        id: d.id,
        name: d.name,
        account_id: d.accountId,
        labels: allLabels(d),
        last_seen_at: d.lastSeenAt?.toISOString() ?? null,
        created_at: d.createdAt.toISOString(),
      }));
    if (values.json) console.log(JSON.stringify(rows));
    else
      for (const r of rows)
        console.log(
          `${r.id}  ${r.name}  last seen ${r.last_seen_at ?? 'never'}  ${Object.entries(r.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(',')}`,
        );
    return;
  }
  if (sub === 'label') {
    const [id, ...args] = positionals;
    if (!id) throw new UsageError('devices label needs a device id, then k=v to set or k- to remove');
    const change = parseLabelArgs(args);
    const r = await withStore(values, (store) => store.fleet.updateLabels(id, { ...change, max: MAX_LABELS }));
    if (!r.ok)
      throw r.error === 'too_many'
        ? new LabelError(`at most ${MAX_LABELS} labels per phone (this change makes ${r.count})`)
        : new Error(`no device "${id}"`);
    const labels = r.labels;
    if (values.json) console.log(JSON.stringify({ id, labels }));
    else
      console.log(
        `${id}  ${Object.entries(labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(',')}`,
      );
    return;
  }
  if (sub === 'remove') {
    const id = oneId(positionals, 'devices remove', 'device id');
    const ok = await withStore(values, (store) => store.removeDevice(id));
    if (!ok) throw new Error(`no device "${id}"`);
    console.log(`removed ${id}`);
    return;
  }
  throw new UsageError('devices: expected list, label or remove');
}

async function enrollCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      ...STORE_FLAGS,
      'max-phones': { type: 'string' },
      expires: { type: 'string' },
      labels: { type: 'string' },
      'name-prefix': { type: 'string' },
      account: { type: 'string' },
      json: { type: 'boolean' },
      'public-url': { type: 'string' },
    },
  });
  if (sub === 'create') {
    noArgs(positionals, 'enroll create');
    if (values['max-phones'] === undefined) throw new UsageError('enroll create needs --max-phones N');
    const max = countValue('max-phones', values['max-phones']);
    if (!values.expires) throw new UsageError('enroll create needs --expires (e.g. 7d, 12h)');
    const expiresMs = parseDuration(values.expires);
    const labels = parseLabelList(values.labels);
    const { relay, fp } = relayForQr(values);
    const e = await withStore(values, async (store) =>
      createEnrollment(store, {
        accountId: values.account !== undefined ? await resolveAccount(store, values.account) : 'local',
        maxPhones: max,
        expiresMs,
        labels,
        namePrefix: values['name-prefix'] ?? null,
        relay,
        fp,
      }),
    );
    const out = { id: e.id, code: e.code, qr: e.qr };
    if (values.json) console.log(JSON.stringify(out));
    else
      console.log(
        `enrollment ${e.id}: up to ${max} phones until ${e.enrollment.expiresAt.toISOString()}\nQR payload (shown once): ${JSON.stringify(e.qr)}`,
      );
    return;
  }
  if (sub === 'list') {
    noArgs(positionals, 'enroll list');
    const rows = (await withStore(values, (store) => store.fleet.listEnrollments())).map((e) => enrollmentJson(e));
    if (values.json) console.log(JSON.stringify(rows));
    else for (const r of rows) console.log(`${r.id}  ${r.used}/${r.max_phones}  ${r.state}  until ${r.expires_at}`);
    return;
  }
  if (sub === 'revoke') {
    const id = oneId(positionals, 'enroll revoke', 'enrollment id');
    const ok = await withStore(values, (store) => store.fleet.revokeEnrollment(id, new Date()));
    if (!ok) throw new Error(`no active enrollment "${id}"`);
    console.log(`revoked ${id}`);
    return;
  }
  throw new UsageError('enroll: expected create, list or revoke');
}

/** A plan cap: "unlimited" (null) or a decimal integer from 0; `--phones ""` is refused, not 0. */
function capValue(flag: string, raw: string | undefined, dflt: number | null): number | null {
  if (raw === undefined) return dflt;
  if (raw === 'unlimited') return null;
  const n = decimalInteger(raw);
  if (n === undefined || n > 2 ** 31 - 1)
    throw new UsageError(
      `--${flag} must be a non-negative decimal integer (at most ${2 ** 31 - 1}) or "unlimited", got "${raw}"`,
    );
  return n;
}

async function resolveAccount(store: Store, ref: string | undefined): Promise<string> {
  if (!ref) throw new UsageError('expected an account id or email');
  const email = ref.includes('@') ? normalizeEmail(ref) : undefined;
  const account = email ? await store.accountByEmail(email) : await store.getAccount(ref);
  if (!account) throw new Error(`no account "${ref}"`);
  return account.id;
}

async function accountsCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      ...STORE_FLAGS,
      email: { type: 'string' },
      phones: { type: 'string' },
      keys: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  if (sub === 'list') {
    noArgs(positionals, 'accounts list');
    const rows = await withStore(values, async (store) => {
      const [accounts, devices] = await Promise.all([store.listAccounts(), store.listDevices()]);
      // keys: what the key cap counts (API keys, fleet keys and OAuth connections: countCredentials).
      const keys = await Promise.all(accounts.map((a) => store.countCredentials(a.id)));
      return accounts.map((a, i) => ({
        id: a.id,
        email: a.email,
        max_phones: a.maxDevices,
        max_keys: a.maxKeys,
        locked: a.locked,
        phones: devices.filter((d) => d.accountId === a.id).length,
        keys: keys[i],
        created_at: a.createdAt.toISOString(),
      }));
    });
    if (values.json) console.log(JSON.stringify(rows));
    else
      for (const r of rows)
        console.log(
          `${r.id}  ${r.email ?? '-'}  phones ${r.phones}/${r.max_phones ?? '∞'}  keys ${r.keys}/${r.max_keys ?? '∞'}${r.locked ? '  LOCKED' : ''}`,
        );
    return;
  }
  if (sub === 'create') {
    noArgs(positionals, 'accounts create');
    const email = normalizeEmail(values.email);
    if (!email) throw new UsageError('accounts create needs --email ADDRESS');
    const maxDevices = capValue('phones', values.phones, DEFAULT_PLAN.maxDevices);
    const maxKeys = capValue('keys', values.keys, DEFAULT_PLAN.maxKeys);
    const r = await withStore(values, (store) =>
      store.createAccount({ id: newId('acct'), email, maxDevices, maxKeys }),
    );
    if (!r.ok) throw new Error(`an account with email ${email} already exists`);
    const out = { id: r.account.id, email, max_phones: maxDevices, max_keys: maxKeys, locked: false };
    if (values.json) console.log(JSON.stringify(out));
    else console.log(`account ${out.id} <${email}>`);
    return;
  }
  if (sub === 'plan') {
    if (values.phones === undefined || values.keys === undefined)
      throw new UsageError('accounts plan needs --phones N and --keys N (or "unlimited")');
    const ref = oneId(positionals, 'accounts plan', 'ACCOUNT (an id or an email)');
    const plan = { maxDevices: capValue('phones', values.phones, null), maxKeys: capValue('keys', values.keys, null) };
    const id = await withStore(values, async (store) => {
      const id = await resolveAccount(store, ref);
      await store.setAccountPlan(id, plan);
      return id;
    });
    console.log(`account ${id}: phones ${plan.maxDevices ?? 'unlimited'}, keys ${plan.maxKeys ?? 'unlimited'}`);
    return;
  }
  if (sub === 'lock' || sub === 'unlock') {
    const ref = oneId(positionals, `accounts ${sub}`, 'ACCOUNT (an id or an email)');
    // The store journals the change; every node applies it within one poll (src/gateway/node.ts).
    const id = await withStore(values, async (store) => {
      const id = await resolveAccount(store, ref);
      await store.setAccountLocked(id, sub === 'lock');
      return id;
    });
    console.log(`${sub === 'lock' ? 'locked' : 'unlocked'} ${id}`);
    return;
  }
  throw new UsageError('accounts: expected list, create, plan, lock or unlock');
}

// Fetching a client's metadata document: the edge around client-metadata-rules.ts. The host is
// resolved once, every address it resolves to is checked, and the connection goes to the checked
// address (a second DNS answer can never be used); https with the platform's trust (plus, only
// when a caller passes one, an extra CA); no redirects; 5 KiB; 5 s for everything; cached per the
// response's Cache-Control within bounds (docs/decisions/0165-client-id-metadata-documents.md).
import { Buffer } from 'node:buffer';
import { request } from 'node:https';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { LookupFunction } from 'node:net';
import { ExpiringMap } from '../bus/expiring-map.ts';
import {
  cacheLifetimeMs,
  classifyAddress,
  clientIdUrlProblem,
  FETCH_TIMEOUT_MS,
  hostOf,
  MAX_DOCUMENT_BYTES,
  parseClientMetadata,
  type ClientMetadata,
} from './client-metadata-rules.ts';

export interface ResolvedAddress {
  address: string;
  family: number;
}

export interface ClientMetadataOptions {
  /**
   * Resolves a host name to its addresses (default: the system resolver, every address). Whatever
   * it answers is checked like any DNS answer: a test host must have a public address.
   */
  resolve?: (hostname: string) => Promise<ResolvedAddress[]>;
  /** PEM of CAs to trust in addition to the platform's (never instead of them). */
  extraCa?: string;
}

export type MetadataResult =
  | { ok: true; client: ClientMetadata; cached: boolean }
  /** `reason` is shown to whoever asked; `detail` (which range refused an address) goes to the log only. */
  | { ok: false; reason: string; detail?: string };

/** Documents kept per node at most; the least recently fetched go first. */
const MAX_ENTRIES = 1_000;

export class ClientMetadataFetcher {
  private readonly cache = new ExpiringMap<ClientMetadata>();
  private readonly inFlight = new Map<string, Promise<MetadataResult>>();
  private readonly resolve: (hostname: string) => Promise<ResolvedAddress[]>;
  private readonly ca?: string[];

  constructor(opts: ClientMetadataOptions = {}) {
    this.resolve = opts.resolve ?? ((h) => lookup(h, { all: true, verbatim: true }));
    this.ca = opts.extraCa ? [...rootCertificates, opts.extraCa] : undefined;
  }

  /** The cached document of `url`, or undefined (no fetch). */
  cached(url: string): ClientMetadata | undefined {
    return this.cache.get(url);
  }

  /**
   * The document of `url`: from the cache, or fetched (one fetch per URL at a time). `mayFetch`
   * is asked before a fetch (the caller's rate limit); false answers without fetching.
   */
  async get(url: string, mayFetch: () => Promise<boolean> = () => Promise.resolve(true)): Promise<MetadataResult> {
    const problem = clientIdUrlProblem(url);
    if (problem) return { ok: false, reason: `client_id ${problem}` };
    const hit = this.cache.get(url);
    if (hit) return { ok: true, client: hit, cached: true };
    const running = this.inFlight.get(url);
    if (running) return running;
    if (!(await mayFetch()))
      return { ok: false, reason: 'too many client metadata documents fetched for this address; try again later' };
    const p = this.fetch(url).finally(() => this.inFlight.delete(url));
    this.inFlight.set(url, p);
    return p;
  }

  close(): void {
    this.cache.close();
  }

  private async fetch(url: string): Promise<MetadataResult> {
    const host = hostOf(url);
    let addresses: ResolvedAddress[];
    try {
      addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await this.resolve(host);
    } catch {
      addresses = [];
    }
    // Every answer must be public: a name that also points inside is not fetched at all. The page
    // says the same for "no address" and "a refused address", so that anyone opening an authorize
    // URL cannot learn which internal names exist; the log says which.
    const refused = `the client_id host ${host} does not resolve to public addresses only`;
    if (addresses.length === 0) return { ok: false, reason: refused, detail: 'no address' };
    for (const a of addresses) {
      const v = classifyAddress(a.address);
      if (!v.ok) return { ok: false, reason: refused, detail: `${a.address} is refused: ${v.reason}` };
    }
    const pinned = addresses[0];
    let got: { status: number; headers: Record<string, string | undefined>; body: Buffer };
    try {
      got = await this.download(url, pinned);
    } catch (err) {
      return { ok: false, reason: `fetching the client metadata document failed: ${(err as Error).message}` };
    }
    if (got.status >= 300 && got.status < 400)
      return { ok: false, reason: `the client metadata document answered ${got.status}: redirects are not followed` };
    if (got.status !== 200)
      return { ok: false, reason: `the client metadata document answered ${got.status}, not 200` };
    let doc: unknown;
    try {
      doc = JSON.parse(got.body.toString('utf8'));
    } catch {
      return { ok: false, reason: 'the client metadata document is not JSON' };
    }
    const parsed = parseClientMetadata(doc, url);
    if (!parsed.ok) return { ok: false, reason: parsed.description };
    // Errors and invalid documents are never cached (draft §4.4); a good one for its lifetime.
    const ttl = cacheLifetimeMs({
      cacheControl: got.headers['cache-control'],
      expires: got.headers.expires,
      date: got.headers.date,
    });
    this.cache.set(url, parsed.value, ttl);
    if (this.cache.size > MAX_ENTRIES) this.cache.delete(this.cache.oldestKey()!);
    return { ok: true, client: parsed.value, cached: false };
  }

  /** GET over https to the pinned address, SNI and certificate checked against the URL's host. */
  private download(
    url: string,
    pinned: ResolvedAddress,
  ): Promise<{ status: number; headers: Record<string, string | undefined>; body: Buffer }> {
    // The socket asks this instead of DNS: it can only ever reach the address checked above.
    const pin: LookupFunction = (_host, options, callback) => {
      const cb = callback as (err: Error | null, address: unknown, family?: number) => void;
      if ((options as { all?: boolean }).all) cb(null, [{ address: pinned.address, family: pinned.family }]);
      else cb(null, pinned.address, pinned.family);
    };
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        reject(err);
        req.destroy();
      };
      const succeed = (v: { status: number; headers: Record<string, string | undefined>; body: Buffer }) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve(v);
      };
      const req = request(url, {
        method: 'GET',
        headers: { accept: 'application/json', 'user-agent': 'phonebridge-relay' },
        lookup: pin,
        agent: false,
        ...(this.ca ? { ca: this.ca } : {}),
      });
      const deadline = setTimeout(() => fail(new Error(`no answer within ${FETCH_TIMEOUT_MS} ms`)), FETCH_TIMEOUT_MS);
      req.on('error', fail);
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const headers = {
          'cache-control': res.headers['cache-control'],
          expires: res.headers.expires,
          date: res.headers.date,
        };
        res.on('error', fail);
        if (status !== 200) {
          succeed({ status, headers, body: Buffer.alloc(0) });
          req.destroy();
          return;
        }
        const tooLarge = () => fail(new Error(`the document is larger than ${MAX_DOCUMENT_BYTES} bytes`));
        if (Number(res.headers['content-length']) > MAX_DOCUMENT_BYTES) return tooLarge();
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_DOCUMENT_BYTES) tooLarge();
          else chunks.push(c);
        });
        res.on('end', () => succeed({ status, headers, body: Buffer.concat(chunks) }));
      });
      req.end();
    });
  }
}

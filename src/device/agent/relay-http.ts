// Talking to the relay before the socket opens: JSON POSTs (/pair, /device/challenge) and the
// TLS pin from the QR's `fp`. A pinned connection is verified on 'secureConnect' before any
// request byte is written; the pin then stands in for CA validation, so a self-signed relay works.
import { Buffer } from 'node:buffer';
import { createHash, X509Certificate } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';

export type FetchLike = typeof fetch;

export class PinMismatchError extends Error {
  constructor(
    readonly expected: string,
    readonly actual: string | undefined,
  ) {
    super(
      `relay TLS key does not match the pinned fingerprint (expected ${expected}, got ${actual ?? 'no certificate'}); refusing to talk to it`,
    );
    this.name = 'PinMismatchError';
  }
}

/** "sha256:<hex>" of a certificate's SubjectPublicKeyInfo (DER), the form the QR's `fp` uses. */
export function spkiFingerprint(certDer: Buffer): string {
  const spki = new X509Certificate(certDer).publicKey.export({ type: 'spki', format: 'der' });
  return 'sha256:' + createHash('sha256').update(spki).digest('hex');
}

/** The pin to enforce for this URL: only https relays have a certificate to pin. */
export function pinFor(url: string, fp: string | undefined): string | undefined {
  return fp !== undefined && url.startsWith('https:') ? fp : undefined;
}

/** Opens a TLS connection and resolves only once the peer's leaf SPKI matches `fp`. */
export function connectPinned(url: URL, fp: string, timeoutMs: number): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const socket = tlsConnect({
      host,
      port: Number(url.port || 443),
      servername: isIP(host) ? undefined : host,
      rejectUnauthorized: false, // the pin below is the trust decision
    });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`TLS connect to ${url.host} timed out`)));
    socket.once('error', reject);
    socket.once('secureConnect', () => {
      socket.setTimeout(0);
      socket.off('error', reject);
      const raw = socket.getPeerCertificate()?.raw;
      const actual = raw ? spkiFingerprint(raw) : undefined;
      if (actual?.toLowerCase() !== fp.toLowerCase()) {
        socket.destroy();
        reject(new PinMismatchError(fp, actual));
        return;
      }
      resolve(socket);
    });
  });
}

export interface PostOptions {
  /** Enforced when the URL is https. */
  fp?: string;
  /** Replaces the built-in client for unpinned requests (the fleet binds source addresses with it); pinned requests always use node:https. */
  fetchImpl?: FetchLike;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface JsonReply {
  status: number;
  /** Parsed body, or undefined when it was not JSON. Callers check each field they read. */
  body: { readonly [field: string]: unknown } | undefined;
}

export async function postJson(url: string, payload: unknown, opts: PostOptions): Promise<JsonReply> {
  const text = JSON.stringify(payload);
  const pin = pinFor(url, opts.fp);
  const signal = opts.signal
    ? AbortSignal.any([opts.signal, AbortSignal.timeout(opts.timeoutMs)])
    : AbortSignal.timeout(opts.timeoutMs);
  if (pin === undefined && opts.fetchImpl) {
    const res = await opts.fetchImpl(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: text,
      signal,
    });
    return { status: res.status, body: parseJson(await res.text()) };
  }
  // Every POST on a connection of its own, never a pooled keep-alive one (fetch would reuse
  // one): after a drop or a 1012 the next challenge must reach whichever node now answers the
  // relay's address, not the draining or stopped node behind an old connection, whose nonce
  // no other node knows (the upgrade would then be refused with 4003, and the agent stops).
  const target = new URL(url);
  const socket = pin !== undefined ? await connectPinned(target, pin, opts.timeoutMs) : undefined;
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
      ...(socket ? { createConnection: () => socket } : { agent: false }),
      timeout: opts.timeoutMs,
      signal,
    });
    req.on('timeout', () => req.destroy(new Error(`POST ${url} timed out`)));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: parseJson(Buffer.concat(chunks).toString('utf8')) }),
      );
    });
    req.end(text);
  });
}

function parseJson(text: string): JsonReply['body'] {
  try {
    return JSON.parse(text) as JsonReply['body']; // any JSON; reading a field of a non-object yields undefined
  } catch {
    return undefined;
  }
}

/** Joins a path onto the relay base URL, which may carry a path prefix. */
export function relayUrl(relay: string, path: string): string {
  return relay.replace(/\/+$/, '') + path;
}

/** ws(s)://{relay}/device/ws */
export function deviceSocketUrl(relay: string): string {
  return relayUrl(relay, '/device/ws').replace(/^http/, 'ws');
}

// Which address a request comes from, for rate limits (docs/decisions/0031-client-addresses.md).
// Pure: the socket's peer address, every X-Forwarded-For value and the operator's trust in.
//
// X-Forwarded-For is a list the client starts and each proxy appends to: only entries added by
// proxies the operator trusts are facts. So the address is taken from the right: the peer (the
// nearest proxy), then leftwards over trusted hops — never the left-most entry, which the client
// writes. IPv6 clients are keyed by their /64 (one subscriber usually holds a whole /64).
import { BlockList, isIP } from 'node:net';

export interface ProxyTrust {
  /** Off: X-Forwarded-For is ignored, the peer is the client. */
  trustProxy: boolean;
  /** Proxies in front of the relay that each append one entry (used without trustedProxies). */
  trustedHops: number;
  /** CIDRs of those proxies; when given, hops are recognised by address instead of counted. */
  trustedProxies: readonly string[];
}

/** `10.0.0.0/8`, `2001:db8::/32`, or a single address; undefined if malformed. */
export function parseCidr(raw: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [addr, bits, extra] = raw.trim().split('/');
  if (extra !== undefined || !addr) return undefined;
  const version = isIP(addr);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) return undefined;
  return { address: addr, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** One address: brackets, a port and an IPv4-mapped prefix removed; undefined if not an IP. */
export function normaliseAddress(raw: string): string | undefined {
  let a = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(a);
  if (bracketed) a = bracketed[1];
  else if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(a)) a = a.slice(0, a.lastIndexOf(':'));
  a = a.toLowerCase();
  const version = isIP(a);
  if (version === 6) return mappedIPv4(a) ?? a;
  return version ? a : undefined;
}

/**
 * The IPv4 address of an IPv4-mapped IPv6 address (::ffff:a.b.c.d), in any spelling: a socket
 * listening on `::` reports IPv4 peers that way, and uWS writes it in full hex
 * (`0000:…:ffff:7f00:0001`). Keyed as IPv6, every IPv4 client would share one /64.
 */
function mappedIPv4(a: string): string | undefined {
  const g = expandIPv6(a);
  if (g.length !== 8 || g[5] !== 'ffff' || !g.slice(0, 5).every((x) => x === '0000')) return undefined;
  const hi = parseInt(g[6], 16);
  const lo = parseInt(g[7], 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

function expandIPv6(a: string): string[] {
  let s = a;
  const v4 = /(\d{1,3}(?:\.\d{1,3}){3})$/.exec(s);
  if (v4) {
    const [p, q, r, t] = v4[1].split('.').map(Number);
    s = s.slice(0, v4.index) + `${((p << 8) | q).toString(16)}:${((r << 8) | t).toString(16)}`;
  }
  const [head, tail] = s.split('::');
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : new Array<string>(8 - h.length - t.length).fill('0');
  return [...h, ...fill, ...t].map((x) => x.padStart(4, '0'));
}

/** The key a rate limit counts under: the IPv4 address, or the IPv6 /64. */
export function limitKey(address: string): string {
  const a = normaliseAddress(address);
  if (!a) return address.slice(0, 64);
  if (isIP(a) === 4) return a;
  return `${expandIPv6(a).slice(0, 4).join(':')}::/64`;
}

/** Every entry of every X-Forwarded-For value, in order (proxies may add a header instead of appending). */
export function forwardedChain(values: readonly string[]): string[] {
  return values
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The client's address (not yet keyed): see the file comment. */
export function pickClientAddress(peer: string, forwardedFor: readonly string[], trust: ProxyTrust): string {
  const peerAddr = normaliseAddress(peer) ?? peer;
  if (!trust.trustProxy) return peerAddr;
  const chain = forwardedChain(forwardedFor);
  if (chain.length === 0) return peerAddr;
  if (trust.trustedProxies.length > 0) {
    const trusted = new BlockList();
    for (const c of trust.trustedProxies) {
      const p = parseCidr(c);
      if (p) trusted.addSubnet(p.address, p.prefix, p.family);
    }
    const isTrusted = (a: string) => {
      const n = normaliseAddress(a);
      return n !== undefined && trusted.check(n, isIP(n) === 4 ? 'ipv4' : 'ipv6');
    };
    // From the peer leftwards, past every trusted proxy; an untrusted peer is the client itself.
    const hops = [...chain, peerAddr];
    let i = hops.length - 1;
    while (i > 0 && isTrusted(hops[i])) i--;
    return normaliseAddress(hops[i]) ?? hops[i];
  }
  // N trusted proxies each appended one entry: the N-th from the right is the one the
  // outermost of them saw connecting. A shorter chain came through fewer of them.
  const entry = chain[Math.max(0, chain.length - Math.max(1, trust.trustedHops))];
  return normaliseAddress(entry) ?? entry;
}

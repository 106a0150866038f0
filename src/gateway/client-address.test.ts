import { describe, expect, it } from 'vitest';
import { limitKey, normaliseAddress, parseCidr, pickClientAddress, type ProxyTrust } from './client-address.ts';

const hops = (n: number): ProxyTrust => ({ trustProxy: true, trustedHops: n, trustedProxies: [] });
const cidrs = (...c: string[]): ProxyTrust => ({ trustProxy: true, trustedHops: 1, trustedProxies: c });
const PEER = '10.0.0.2'; // the ingress, as the relay sees it

describe('pickClientAddress', () => {
  it('ignores X-Forwarded-For without --trust-proxy', () => {
    expect(pickClientAddress('203.0.113.9', ['9.9.9.9'], { ...hops(1), trustProxy: false })).toBe('203.0.113.9');
  });

  it('one trusted hop: the right-most entry, whatever the client wrote to its left', () => {
    expect(pickClientAddress(PEER, ['203.0.113.7'], hops(1))).toBe('203.0.113.7');
    // The client wrote "9.9.9.1, 198.51.100.1"; the ingress appended the address it saw.
    expect(pickClientAddress(PEER, ['9.9.9.1, 198.51.100.1, 203.0.113.7'], hops(1))).toBe('203.0.113.7');
    // A second header line counts as later entries.
    expect(pickClientAddress(PEER, ['9.9.9.1', '203.0.113.7'], hops(1))).toBe('203.0.113.7');
    expect(pickClientAddress(PEER, [], hops(1))).toBe(PEER);
    expect(pickClientAddress(PEER, [' , '], hops(1))).toBe(PEER);
  });

  it('N trusted hops: the N-th from the right; a shorter chain its left-most', () => {
    expect(pickClientAddress(PEER, ['9.9.9.9, 203.0.113.7, 10.0.0.1'], hops(2))).toBe('203.0.113.7');
    expect(pickClientAddress(PEER, ['203.0.113.7'], hops(3))).toBe('203.0.113.7');
  });

  it('trusted proxy CIDRs: leftwards past every trusted address; an untrusted peer is the client', () => {
    const t = cidrs('10.0.0.0/8', 'fd00::/8');
    expect(pickClientAddress(PEER, ['9.9.9.9, 203.0.113.7, 10.1.1.1'], t)).toBe('203.0.113.7');
    expect(pickClientAddress('fd00::2', ['9.9.9.9, 2001:db8::5'], t)).toBe('2001:db8::5');
    // Straight to the pod, not through the proxy: X-Forwarded-For is the attacker's own words.
    expect(pickClientAddress('198.51.100.4', ['10.0.0.9'], t)).toBe('198.51.100.4');
    // Every hop trusted: the left-most.
    expect(pickClientAddress(PEER, ['10.0.0.8, 10.0.0.9'], t)).toBe('10.0.0.8');
  });

  it('normalises what proxies write: ports, brackets, IPv4-mapped IPv6, case', () => {
    expect(pickClientAddress(PEER, ['203.0.113.7:5555'], hops(1))).toBe('203.0.113.7');
    expect(pickClientAddress(PEER, ['[2001:DB8::1]:443'], hops(1))).toBe('2001:db8::1');
    expect(pickClientAddress('::ffff:127.0.0.1', [], hops(1))).toBe('127.0.0.1');
    expect(normaliseAddress('0000:0000:0000:0000:0000:ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(normaliseAddress('not an ip')).toBeUndefined();
  });

  it('reads an IPv4 peer of a dual-stack listener in the full hex form uWS reports as that IPv4 address', () => {
    // getRemoteAddressAsText() for 127.0.0.1 connecting to a socket listening on "::"
    expect(normaliseAddress('0000:0000:0000:0000:0000:ffff:7f00:0001')).toBe('127.0.0.1');
    expect(normaliseAddress('::FFFF:CB00:7105')).toBe('203.0.113.5');
    expect(limitKey('0000:0000:0000:0000:0000:ffff:cb00:7105')).toBe('203.0.113.5');
    expect(limitKey('0000:0000:0000:0000:0000:ffff:c633:6407')).toBe('198.51.100.7');
    // Not mapped: an IPv6 address that merely contains ffff stays IPv6.
    expect(normaliseAddress('0:0:0:0:1:ffff:7f00:1')).toBe('0:0:0:0:1:ffff:7f00:1');
    expect(normaliseAddress('::ffff:0:7f00:1')).toBe('::ffff:0:7f00:1');
  });
});

describe('limitKey', () => {
  it('keys IPv4 by address and IPv6 by /64', () => {
    expect(limitKey('203.0.113.7')).toBe('203.0.113.7');
    expect(limitKey('2001:db8:1:2::a')).toBe('2001:0db8:0001:0002::/64');
    expect(limitKey('2001:db8:1:2:ffff:ffff:ffff:ffff')).toBe(limitKey('2001:db8:1:2::1'));
    expect(limitKey('2001:db8:1:3::1')).not.toBe(limitKey('2001:db8:1:2::1'));
    expect(limitKey('::1')).toBe('0000:0000:0000:0000::/64');
    expect(limitKey('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(limitKey('x'.repeat(500))).toHaveLength(64);
  });
});

describe('parseCidr', () => {
  it('accepts addresses and CIDRs, refuses the rest', () => {
    expect(parseCidr('10.0.0.0/8')).toEqual({ address: '10.0.0.0', prefix: 8, family: 'ipv4' });
    expect(parseCidr('fd00::/8')).toEqual({ address: 'fd00::', prefix: 8, family: 'ipv6' });
    expect(parseCidr('10.0.0.1')).toEqual({ address: '10.0.0.1', prefix: 32, family: 'ipv4' });
    for (const bad of ['10.0.0.0/33', '10.0.0.0/', 'fd00::/129', 'proxy.local', '10.0.0.0/8/9', ''])
      expect(parseCidr(bad), bad).toBeUndefined();
  });
});

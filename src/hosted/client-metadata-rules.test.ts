import { describe, expect, it } from 'vitest';
import {
  cacheLifetimeMs,
  classifyAddress,
  clientIdUrlProblem,
  MAX_CACHE_MS,
  MIN_CACHE_MS,
  parseClientMetadata,
} from './client-metadata-rules.ts';

describe('the address guard', () => {
  // One address in (or at the edge of) every refused range, with the range it must be refused as.
  const refused: [string, RegExp][] = [
    ['0.0.0.0', /unspecified/],
    ['0.255.255.255', /this network/],
    ['10.0.0.1', /private/],
    ['10.255.255.255', /private/],
    ['100.64.0.1', /CGNAT/],
    ['100.127.255.254', /CGNAT/],
    ['127.0.0.1', /loopback/],
    ['127.255.255.255', /loopback/],
    ['169.254.169.254', /link-local/], // cloud metadata services
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.0.0.8', /IETF protocol/],
    ['192.0.2.10', /TEST-NET-1/],
    ['192.88.99.1', /6to4/],
    ['192.168.1.1', /private/],
    ['198.18.0.1', /benchmarking/],
    ['198.19.255.255', /benchmarking/],
    ['198.51.100.7', /TEST-NET-2/],
    ['203.0.113.255', /TEST-NET-3/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['240.0.0.1', /reserved/],
    ['255.255.255.255', /reserved/],
    ['::', /unspecified/],
    ['::1', /loopback/],
    ['fc00::1', /unique local/],
    ['fd12:3456:789a::1', /unique local/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /zone/],
    ['febf:ffff::1', /link-local/],
    ['fec0::1', /site-local/],
    ['ff02::1', /multicast/],
    ['100::1', /discard/],
    ['64:ff9b:1::a00:1', /local-use NAT64/],
    ['2001:db8::1', /documentation/],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /Teredo/],
    ['2002:c000:0204::1', /6to4/],
    ['3fff::1', /documentation/],
    ['::ffff:127.0.0.1', /IPv4-mapped loopback/],
    ['::ffff:7f00:1', /IPv4-mapped loopback/],
    ['::ffff:10.1.2.3', /IPv4-mapped private/],
    ['::ffff:169.254.169.254', /IPv4-mapped link-local/],
    ['::ffff:100.64.0.1', /IPv4-mapped shared/],
    ['::ffff:0.0.0.0', /IPv4-mapped this network/],
    ['64:ff9b::7f00:1', /NAT64 of loopback/],
    ['::127.0.0.1', /not global unicast/], // IPv4-compatible (deprecated)
    ['::a00:1', /not global unicast/],
    ['4000::1', /not global unicast/],
    ['localhost', /not an IP address/],
  ];
  it.each(refused)('refuses %s', (address, reason) => {
    const v = classifyAddress(address);
    expect(v.ok).toBe(false);
    expect(v.ok ? '' : v.reason).toMatch(reason);
  });

  it('allows public unicast, right next to the refused ranges too', () => {
    for (const a of [
      '1.1.1.1',
      '8.8.8.8',
      '9.255.255.255',
      '11.0.0.0',
      '100.63.255.255',
      '100.128.0.0',
      '126.255.255.255',
      '128.0.0.0',
      '169.253.255.255',
      '172.15.255.255',
      '172.32.0.0',
      '192.0.3.0',
      '192.167.255.255',
      '198.17.255.255',
      '198.20.0.0',
      '203.0.114.7',
      '223.255.255.255',
      '2606:4700:4700::1111',
      '2a00:1450:4001::1',
      '2001:4860:4860::8888',
      '::ffff:8.8.8.8',
      '64:ff9b::808:808',
    ])
      expect(classifyAddress(a), a).toEqual({ ok: true });
  });
});

describe('client_id URLs', () => {
  it('accepts an https URL with a path, a port allowed', () => {
    for (const ok of [
      'https://app.example.com/oauth/client.json',
      'https://app.example.com:8443/client',
      'https://203.0.114.7/c.json',
      'https://[2606:4700::1]/c.json',
    ])
      expect(clientIdUrlProblem(ok), ok).toBeUndefined();
  });
  it('refuses each form the draft forbids, and localhost by name', () => {
    const cases: [string, RegExp][] = [
      ['http://app.example.com/client.json', /https/],
      ['https://app.example.com', /path/],
      ['https://app.example.com/', /path/],
      ['https://app.example.com/a/../client.json', /\.\. path segments|\. or \.\./],
      ['https://app.example.com/a/./client.json', /\. or \.\./],
      ['https://app.example.com/a/%2e%2e/client.json', /\. or \.\./],
      ['https://app.example.com/client.json#x', /fragment/],
      ['https://user:pw@app.example.com/client.json', /user or password/],
      ['https://app.example.com/client.json?v=1', /query/],
      ['https://localhost/client.json', /localhost/],
      ['https://a.b.localhost/client.json', /localhost/],
      ['https://APP.example.com/client.json', /normal form/],
      ['https://app.example.com/client.json ', /control/],
      ['client.json', /absolute/],
      [`https://app.example.com/${'a'.repeat(2000)}`, /at most/],
    ];
    for (const [url, why] of cases) expect(clientIdUrlProblem(url), url).toMatch(why);
  });
});

describe('cache lifetime', () => {
  it('follows max-age within [min, max]; no-store, no-cache and nothing give the minimum', () => {
    expect(cacheLifetimeMs({ cacheControl: 'public, max-age=600' })).toBe(600_000);
    expect(cacheLifetimeMs({ cacheControl: 'max-age=5' })).toBe(MIN_CACHE_MS);
    expect(cacheLifetimeMs({ cacheControl: 'max-age=31536000' })).toBe(MAX_CACHE_MS);
    expect(cacheLifetimeMs({ cacheControl: 'max-age="120"' })).toBe(120_000);
    expect(cacheLifetimeMs({ cacheControl: 'no-store' })).toBe(MIN_CACHE_MS);
    expect(cacheLifetimeMs({ cacheControl: 'max-age=600, no-cache' })).toBe(MIN_CACHE_MS);
    expect(cacheLifetimeMs({ cacheControl: 'max-age=abc' })).toBe(MIN_CACHE_MS);
    expect(cacheLifetimeMs({})).toBe(MIN_CACHE_MS);
  });
  it('uses Expires against Date when there is no max-age; max-age wins over Expires', () => {
    const date = 'Wed, 02 Dec 2026 08:00:00 GMT';
    expect(cacheLifetimeMs({ expires: 'Wed, 02 Dec 2026 08:20:00 GMT', date })).toBe(1_200_000);
    expect(cacheLifetimeMs({ expires: 'Wed, 02 Dec 2026 07:00:00 GMT', date })).toBe(MIN_CACHE_MS);
    expect(cacheLifetimeMs({ expires: '0', date })).toBe(MIN_CACHE_MS);
    expect(cacheLifetimeMs({ cacheControl: 'max-age=300', expires: 'Thu, 03 Dec 2026 08:00:00 GMT', date })).toBe(
      300_000,
    );
  });
});

describe('the metadata document', () => {
  const url = 'https://app.example.com/client.json';
  const good = { client_id: url, client_name: 'Example', redirect_uris: ['http://127.0.0.1:3000/cb'] };
  it('accepts a public client whose client_id is the URL', () => {
    expect(parseClientMetadata({ ...good, token_endpoint_auth_method: 'none' }, url)).toEqual({
      ok: true,
      value: { clientId: url, clientName: 'Example', redirectUris: ['http://127.0.0.1:3000/cb'] },
    });
  });
  it('refuses a mismatched client_id, missing fields, secrets and bad redirect URIs', () => {
    const cases: [unknown, RegExp][] = [
      [[good], /not a JSON object/],
      [{ ...good, client_id: `${url}/` }, /client_id is not the URL/],
      [{ ...good, client_id: 'https://APP.example.com/client.json' }, /client_id is not the URL/],
      [{ ...good, client_name: undefined }, /client_name/],
      [{ ...good, client_secret: 'x' }, /secret/],
      [{ ...good, token_endpoint_auth_method: 'client_secret_basic' }, /public clients/],
      [{ ...good, token_endpoint_auth_method: 'private_key_jwt' }, /public clients/],
      [{ ...good, redirect_uris: [] }, /redirect_uris/],
      [{ ...good, redirect_uris: ['http://evil.example/cb'] }, /https, or http on a loopback/],
      [{ ...good, redirect_uris: ['http://127.0.0.1:3000/cb#'] }, /fragment/],
      [{ ...good, grant_types: ['implicit'] }, /grant type/],
    ];
    for (const [doc, why] of cases) {
      const r = parseClientMetadata(doc, url);
      expect(r.ok).toBe(false);
      expect(r.ok ? '' : r.description).toMatch(why);
    }
  });
});

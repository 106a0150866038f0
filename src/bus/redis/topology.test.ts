import { describe, expect, it } from 'vitest';
import { describeTopology, parseRedisUrl, RedisUrlError } from './topology.ts';
import { ConfigError, parseRelayConfig } from '../../config.ts';

describe('parseRedisUrl: one URL names the topology', () => {
  it('one Redis: redis:// and rediss:// as ioredis reads them', () => {
    expect(parseRedisUrl('redis://127.0.0.1:6379')).toEqual({
      kind: 'single',
      url: 'redis://127.0.0.1:6379',
      tls: false,
    });
    expect(parseRedisUrl('rediss://:s3cret@redis.internal/2')).toMatchObject({
      kind: 'single',
      tls: true,
      password: 's3cret',
    });
    expect(parseRedisUrl('redis://app:p%40ss@h')).toMatchObject({ username: 'app', password: 'p@ss' });
  });

  it('Sentinel: sentinels, master name, database, password, TLS', () => {
    expect(parseRedisUrl('redis+sentinel://h1:26379,h2:26380,[::1]/mymaster')).toEqual({
      kind: 'sentinel',
      sentinels: [
        { host: 'h1', port: 26379 },
        { host: 'h2', port: 26380 },
        { host: '::1', port: 26379 },
      ],
      masterName: 'mymaster',
      db: 0,
      sentinelPassword: undefined,
      tls: false,
    });
    expect(parseRedisUrl('rediss+sentinel://:pw@h1/m/3?sentinelPassword=sp')).toMatchObject({
      kind: 'sentinel',
      masterName: 'm',
      db: 3,
      password: 'pw',
      sentinelPassword: 'sp',
      tls: true,
    });
  });

  it('Cluster: startup nodes, password, TLS', () => {
    expect(parseRedisUrl('redis+cluster://:pw@a:7000,b')).toEqual({
      kind: 'cluster',
      nodes: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 6379 },
      ],
      password: 'pw',
      username: undefined,
      tls: false,
    });
    expect(parseRedisUrl('rediss+cluster://a:7000')).toMatchObject({ kind: 'cluster', tls: true });
  });

  it('refuses what names no topology, with the reason', () => {
    const bad: Array<[string, RegExp]> = [
      ['http://h:6379', /must start with one of redis:\/\//],
      ['redis+sentinel://h1:26379', /needs the master name/],
      ['redis+sentinel://h1/m/x', /not a database number/],
      ['redis+sentinel://h1/m/0/1', /not a database number/],
      ['redis://a,b', /names one host; use redis\+sentinel:\/\/ or redis\+cluster:\/\//],
      ['redis+cluster://a:7000/1', /takes no database/],
      ['redis+cluster://a:99999', /"a:99999" is not host\[:port\]/],
      ['redis+cluster://', /names no host/],
      ['redis://h/16', /not a database number/],
    ];
    for (const [url, why] of bad) expect(() => parseRedisUrl(url), url).toThrow(why);
    expect(() => parseRedisUrl('redis+cluster://:p%zz@a')).toThrow(RedisUrlError);
  });

  it('describes a topology without its password', () => {
    for (const url of ['redis://:hunter2@h:1/2', 'redis+sentinel://:hunter2@h1,h2/m', 'redis+cluster://:hunter2@a,b']) {
      const line = describeTopology(parseRedisUrl(url));
      expect(line).not.toContain('hunter2');
      expect(line).toMatch(/h:1\/2|h1:26379, h2:26379|a:6379, b:6379/);
    }
  });

  it('serve refuses a malformed --redis-url at once (ConfigError: exit 2)', () => {
    expect(() => parseRelayConfig(['--redis-url', 'redis+sentinel://h1'], {})).toThrow(ConfigError);
    expect(() => parseRelayConfig([], { PHONEBRIDGE_REDIS_URL: 'redis+cluster://a/1' })).toThrow(/takes no database/);
    expect(parseRelayConfig(['--redis-url', 'redis+cluster://a,b'], {}).redisUrl).toBe('redis+cluster://a,b');
  });
});

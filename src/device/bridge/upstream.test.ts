import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { bridgeServerFactory } from './index.ts';
import { programOf, withoutSecrets } from './upstream.ts';

describe('the program of an --upstream-cmd, for start-up errors', () => {
  it('is the first word as the shell reads it, without the arguments', () => {
    expect(programOf('  mcp-server --token s3cret')).toBe('mcp-server');
    expect(programOf(`'/opt/my server/bin' --x`)).toBe('/opt/my server/bin');
    expect(programOf(`"/opt/a \\"b\\"/srv"`)).toBe('/opt/a "b"/srv');
    expect(programOf('my\\ server;echo')).toBe('my server');
    expect(programOf('API_KEY=s3cret server')).toBe('API_KEY=…');
  });
});

describe('the upstream URL in the operator’s log', () => {
  it('keeps no user info and no query', () => {
    expect(withoutSecrets('https://bob:hunter2@mcp.example.com/mcp?token=s3cret&x=1')).toBe(
      'https://***@mcp.example.com/mcp?…',
    );
    expect(withoutSecrets('http://127.0.0.1:9/mcp')).toBe('http://127.0.0.1:9/mcp');
    expect(withoutSecrets('not a url hunter2')).toBe('(an unparsable URL)');
  });

  it('keeps no user name either: a token is often sent as one (https://<token>@host)', () => {
    expect(withoutSecrets('https://ghp_s3cret@mcp.example.com/mcp')).toBe('https://***@mcp.example.com/mcp');
    expect(withoutSecrets('https://ghp_s3cret:@mcp.example.com/mcp')).toBe('https://***@mcp.example.com/mcp');
    expect(withoutSecrets('https://:hunter2@mcp.example.com/mcp')).toBe('https://***@mcp.example.com/mcp');
  });

  it('a bridge that cannot reach its upstream says so without the URL’s secrets', async () => {
    // A port nothing listens on: taken, then released.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const lines: string[] = [];
    const log = {
      info: (m: string) => void lines.push(m),
      warn: (m: string) => void lines.push(m),
      error: (m: string) => void lines.push(m),
    };
    const err = await bridgeServerFactory({
      upstreamUrl: `http://bob:hunter2@127.0.0.1:${port}/mcp?token=s3cret`,
      log,
    }).then(
      (f) => f.close().then(() => 'started'),
      (e: Error) => e.message,
    );
    expect(err).toMatch(/could not start the upstream MCP server http:\/\/\*\*\*@127\.0\.0\.1:\d+\/mcp\?…/);
    for (const text of [err, ...lines]) {
      expect(text).not.toContain('bob');
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('s3cret');
    }
  });
});

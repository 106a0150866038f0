// The command line as people use it: serve, pair, device run, keys, devices, demo — each a
// real process; the official SDK client drives the phone through them.
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { connectClient, tempDir, waitFor } from '../helpers/relay.ts';
import { cli, startChild, type Child } from '../helpers/processes.ts';

const children: Child[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dir(prefix: string): string {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

describe('phonebridge serve + CLI + device run', () => {
  it('pairs a phone, mints and revokes keys, removes the phone with 4004, and drains on SIGTERM', async () => {
    const data = dir('pb-cli-');
    const serve = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', data]);
    children.push(serve);
    const ready = await serve.ready;
    const url = `http://127.0.0.1:${ready.port}`;

    const qr = JSON.parse(await cli(['pair', '--json', '--data-dir', data]));
    expect(qr).toMatchObject({ v: 1, relay: url });
    expect(qr.code).toMatch(/^([A-Z2-7]{4}-){7}[A-Z2-7]{4}$/);

    const phone = startChild([
      'device',
      'run',
      '--state',
      dir('pb-cli-phone-'),
      '--pair',
      JSON.stringify(qr),
      '--name',
      'cli phone',
    ]);
    children.push(phone);
    let devices: any[] = [];
    await waitFor(
      async () => {
        devices = JSON.parse(await cli(['devices', 'list', '--json', '--data-dir', data]));
        return devices.length === 1 && devices[0].last_seen_at !== null;
      },
      30_000,
      'phone connected',
    );
    expect(devices[0].name).toBe('cli phone');
    const deviceId = devices[0].id;

    const key = JSON.parse(await cli(['keys', 'create', '--device', deviceId, '--json', '--data-dir', data]));
    expect(key).toMatchObject({
      device_id: deviceId,
      scopes: ['devices:read', 'devices:act', 'devices:lease', 'runs:start'],
    });
    expect(key.token).toMatch(/^pb_/);
    const readOnly = JSON.parse(
      await cli(['keys', 'create', '--device', deviceId, '--scopes', 'devices:read', '--json', '--data-dir', data]),
    );
    expect(readOnly.scopes).toEqual(['devices:read']);
    const listed = JSON.parse(await cli(['keys', 'list', '--json', '--data-dir', data]));
    expect(listed.map((k: any) => k.id).sort()).toEqual([key.id, readOnly.id].sort());
    expect(JSON.stringify(listed)).not.toContain(key.token);

    const { client } = await connectClient(`${url}/mcp`, key.token);
    const r = await client.callTool({ name: 'list_devices', arguments: {} });
    expect(r.isError).toBeFalsy();

    // Revocation from the CLI takes effect on the running server.
    await cli(['keys', 'revoke', readOnly.id, '--data-dir', data]);
    await waitFor(
      async () =>
        (
          await fetch(`${url}/mcp`, {
            method: 'POST',
            headers: { 'x-api-key': readOnly.token, 'content-type': 'application/json' },
            body: '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}',
          })
        ).status === 401,
      5000,
      'revoked key refused',
    );

    // Removal from the CLI closes the phone's socket with 4004 within a second; the phone stops.
    const t0 = Date.now();
    await cli(['devices', 'remove', deviceId, '--data-dir', data]);
    const removedAfter = Date.now() - t0;
    const exit = await phone.exited;
    const stoppedAfter = Date.now() - t0;
    expect(exit.code).toBe(3);
    expect(phone.stderr.join('\n')).toMatch(/removed/);
    console.log(
      `device removal: CLI returned after ${removedAfter} ms, phone stopped ${stoppedAfter - removedAfter} ms later`,
    );
    expect(stoppedAfter - removedAfter).toBeLessThan(5000);
    const err = await client.callTool({ name: 'list_devices', arguments: {} }).catch((e) => e);
    expect(String(err)).toMatch(/invalid_token/);

    const bye = await serve.kill('SIGTERM');
    expect(bye.code).toBe(0);
  }, 240_000); // about ten processes, each starting node + tsx: slow on a loaded 2-core machine

  it('refuses an unknown scope with a usage error', async () => {
    const data = dir('pb-cli-');
    await expect(
      cli(['keys', 'create', '--device', 'dev_x', '--scopes', 'devices:everything', '--data-dir', data]),
    ).rejects.toThrow(/unknown scope/);
  });

  it('refuses an empty --scopes instead of minting a key with every scope', async () => {
    // `--scopes "$SCOPES"` with an unset variable must not widen the key to all four scopes.
    const data = dir('pb-cli-');
    for (const scopes of ['', ',', ' '])
      await expect(
        cli(['keys', 'create', '--device', 'dev_x', '--scopes', scopes, '--data-dir', data]),
      ).rejects.toThrow(/--scopes needs at least one scope/);
    await expect(cli(['keys', 'create', '--fleet', '--scopes', '', '--data-dir', data])).rejects.toThrow(
      /--scopes needs at least one scope/,
    );
  });
});

describe('serve --exit-with-parent', () => {
  it('drains and exits 0 when its parent goes away (stdin closes)', async () => {
    const data = dir('pb-orphan-');
    const serve = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', data, '--exit-with-parent']);
    children.push(serve);
    const ready = await serve.ready;
    expect((await fetch(`http://127.0.0.1:${ready.adminPort}/healthz`)).status).toBe(200);
    serve.proc.stdin!.end(); // what the kernel does to the pipe when the parent dies
    expect(await serve.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});

describe('npm start (phonebridge demo)', () => {
  it('serves a working MCP endpoint with a simulated phone and prints a key', async () => {
    const data = dir('pb-demo-');
    const t0 = Date.now();
    const demo = startChild(['demo', '--port', '0', '--admin-port', '0', '--data-dir', data]);
    children.push(demo);
    const ready = await demo.ready;
    const { client } = await connectClient(ready.url, ready.apiKey);
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain('observe_screen');
    const obs = await client.callTool({ name: 'observe_screen', arguments: {} });
    expect(obs.isError).toBeFalsy();
    // Reported, not asserted: machines here are noisy (the target is 10 s on a fresh clone).
    console.log(`npm start: MCP endpoint answering ${Date.now() - t0} ms after launch (fresh data dir)`);
    await client.close();
    expect((await demo.kill('SIGTERM')).code).toBe(0);
  }, 120_000);
});

/** A port that was free a moment ago (the demo takes a fixed port, as a person would type it). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('npm start again on another port (same data dir)', () => {
  async function startDemo(data: string, port: number) {
    const demo = startChild(['demo', '--port', String(port), '--admin-port', '0', '--data-dir', data]);
    children.push(demo);
    return { demo, ready: await demo.ready };
  }
  async function demoPhones(data: string): Promise<Array<{ id: string; name: string }>> {
    const devices = JSON.parse(await cli(['devices', 'list', '--json', '--data-dir', data])) as Array<{
      id: string;
      name: string;
    }>;
    return devices.filter((d) => d.name === 'demo phone');
  }
  async function callThrough(ready: Record<string, any>): Promise<void> {
    const { client } = await connectClient(ready.url, ready.apiKey);
    const obs = await client.callTool({ name: 'observe_screen', arguments: {} });
    expect(obs.isError).toBeFalsy();
    expect(JSON.stringify(obs)).not.toContain('device_offline');
    await client.close();
  }

  it('prints a key that reaches the phone connected now, and keeps one demo phone', async () => {
    const data = dir('pb-demo-again-');
    const first = await startDemo(data, await freePort());
    await callThrough(first.ready);
    expect((await first.demo.kill('SIGTERM')).code).toBe(0);

    // Another port: the phone is re-pointed at the new URL, keeping its device and its key.
    const second = await startDemo(data, await freePort());
    expect(second.ready.url).not.toBe(first.ready.url);
    expect(second.ready.deviceId).toBe(first.ready.deviceId);
    expect(second.ready.apiKey).toBe(first.ready.apiKey);
    await callThrough(second.ready);
    expect((await demoPhones(data)).map((d) => d.id)).toEqual([second.ready.deviceId]);

    // The demo phone removed by hand: the next start pairs a new one, mints a key for it, and the
    // old key (which died with its device) is not printed again.
    await cli(['devices', 'remove', second.ready.deviceId, '--data-dir', data]);
    expect((await second.demo.kill('SIGTERM')).code).toBe(0);
    const third = await startDemo(data, await freePort());
    expect(third.ready.deviceId).not.toBe(second.ready.deviceId);
    expect(third.ready.apiKey).not.toBe(second.ready.apiKey);
    await callThrough(third.ready);
    expect((await demoPhones(data)).map((d) => d.id)).toEqual([third.ready.deviceId]);
    expect((await third.demo.kill('SIGTERM')).code).toBe(0);
  }, 120_000);
});

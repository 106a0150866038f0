// A real HTTPS host at a public address, for the client metadata document tests: a network
// namespace holding a public IPv4 address (from 203.0.114.0/24, which is allocated public space,
// next to the documentation range 203.0.113.0/24), joined to this namespace by a veth pair and
// one /32 route, so nothing else on the machine changes. Its certificate comes from a CA made
// here with openssl; the relay is given that CA as an extra trust anchor, never a switch that
// turns verification off. Needs root (CAP_NET_ADMIN) and iproute2, as CI runs.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { tempDir } from '../helpers/relay.ts';

export interface Route {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Accept the request and never answer. */
  hang?: boolean;
}

export interface PublicHost {
  /** The public address the host listens on (port 443). */
  address: string;
  /** The DNS name its certificate is for (resolved only by the resolver a test passes). */
  name: string;
  /** PEM of the CA that signed its certificate. */
  caPem: string;
  /** Paths requested so far, in order. */
  requests: string[];
  close(): Promise<void>;
}

const SERVER = `
import { createServer } from 'node:https';
import { readFileSync } from 'node:fs';
const [keyPath, certPath, routesPath, host] = process.argv.slice(2);
const routes = JSON.parse(readFileSync(routesPath, 'utf8'));
createServer({ key: readFileSync(keyPath), cert: readFileSync(certPath) }, (req, res) => {
  process.stdout.write(JSON.stringify({ path: req.url }) + '\\n');
  const r = routes[req.url];
  if (!r) { res.writeHead(404); res.end(); return; }
  if (r.hang) return;
  res.writeHead(r.status ?? 200, r.headers ?? { 'content-type': 'application/json' });
  res.end(r.body ?? '');
}).listen(443, host, () => process.stdout.write(JSON.stringify({ ready: true }) + '\\n'));
`;

function sh(cmd: string, args: string[]): void {
  execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export async function startPublicHost(
  name: string,
  routes: (origin: string) => Record<string, Route>,
): Promise<PublicHost> {
  const dir = tempDir('pb-cimd-');
  const tag = randomBytes(3).toString('hex');
  const ns = `pbcimd-${tag}`;
  const [vHere, vThere] = [`pbc${tag}a`, `pbc${tag}b`];
  // Allocated, routed public space (APNIC), never the documentation ranges the guard refuses.
  const address = `203.0.114.${1 + (randomBytes(1)[0] % 250)}`;

  const file = (f: string) => join(dir, f);
  sh('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.pem'),
    '-days',
    '1',
    '-subj',
    '/CN=phonebridge test CA',
  ]);
  sh('openssl', [
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    file('host.key'),
    '-out',
    file('host.csr'),
    '-subj',
    `/CN=${name}`,
  ]);
  writeFileSync(
    file('ext.cnf'),
    `subjectAltName=DNS:${name},IP:${address}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n`,
  );
  sh('openssl', [
    'x509',
    '-req',
    '-in',
    file('host.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file('host.pem'),
    '-days',
    '1',
    '-extfile',
    file('ext.cnf'),
  ]);
  writeFileSync(file('routes.json'), JSON.stringify(routes(`https://${name}`)));
  writeFileSync(file('server.mjs'), SERVER);

  const cleanup = (child?: ChildProcess) => {
    child?.kill('SIGKILL');
    try {
      sh('ip', ['netns', 'del', ns]); // takes the veth pair, and with it the route
    } catch {
      // not created
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    sh('ip', ['netns', 'add', ns]);
    sh('ip', ['link', 'add', vHere, 'type', 'veth', 'peer', 'name', vThere]);
    sh('ip', ['link', 'set', vThere, 'netns', ns]);
    sh('ip', ['link', 'set', vHere, 'up']);
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    sh('ip', ['-n', ns, 'link', 'set', vThere, 'up']);
    sh('ip', ['-n', ns, 'addr', 'add', `${address}/32`, 'dev', vThere]);
    sh('ip', ['-n', ns, 'route', 'add', 'default', 'dev', vThere]);
    sh('ip', ['route', 'add', `${address}/32`, 'dev', vHere]);
  } catch (err) {
    cleanup();
    const e = err as Error & { stderr?: Buffer };
    throw new Error(
      `the client metadata tests need a network namespace (root, iproute2): ${e.stderr?.toString().trim() || e.message}`,
      { cause: err },
    );
  }
  const requests: string[] = [];
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      ns,
      process.execPath,
      file('server.mjs'),
      file('host.key'),
      file('host.pem'),
      file('routes.json'),
      address,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the test host did not start within 20 s')), 20_000);
    child.once('exit', (code) => reject(new Error(`the test host exited (${code})`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = JSON.parse(line) as { ready?: boolean; path?: string };
      if (m.ready) {
        clearTimeout(timer);
        resolve();
      }
      if (m.path) requests.push(m.path);
    });
  });
  try {
    await ready;
  } catch (err) {
    cleanup(child);
    throw err;
  }
  return {
    address,
    name,
    caPem: readFileSync(file('ca.pem'), 'utf8'),
    requests,
    close: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      cleanup();
    },
  };
}

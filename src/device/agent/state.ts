// The phone's identity on disk: one directory (`--state DIR`, 0700) holding the P-256 private key
// and device.json, both 0600 and written atomically so a crash never leaves half a file.
// The key is written before /pair is called: a pairing code is single use, so losing the key
// after a successful pair would waste it.
import process from 'node:process';
import { createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { generateDeviceKey, loadPrivateKey, type DeviceKeyPair } from '../../crypto/device-auth.ts';

export const KEY_FILE = 'device-key.pem';
export const IDENTITY_FILE = 'device.json';

/** What device.json holds (field names as on the wire). */
export interface DeviceIdentity {
  device_id: string;
  /** Relay base URL from the QR payload, e.g. https://relay.example.com */
  relay: string;
  /** The host the relay returned from /pair; bound into every signature
   * (docs/decisions/0010-signature-binds-relay-host.md). */
  relay_host: string;
  /** "sha256:<hex>" pin of the relay's TLS leaf SPKI, when the QR carried one. */
  fp?: string;
  name: string;
  /** Set when the relay closed with 4004: the pairing is gone and the agent will not start on it. */
  removed_at?: string;
}

/** Creates the state dir (0700) if needed. An existing dir is left as is, with a warning if others can read it. */
export function ensureStateDir(dir: string, warn: (msg: string) => void = () => {}): void {
  let existed = true;
  try {
    statSync(dir);
  } catch {
    existed = false;
  }
  if (existed && !statSync(dir).isDirectory()) throw notADirectory(dir);
  if (!existed) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700); // mkdir's mode is filtered by the umask
  } else if ((statSync(dir).mode & 0o077) !== 0) {
    warn(`state dir ${dir} is accessible to other users; it holds the device's private key`);
  }
}

/** Writes a 0600 file via temp + fsync + rename, so readers see the old or the new content, never a mix. */
export function writeFileAtomic(path: string, content: string): void {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

const notADirectory = (dir: string) => new Error(`state dir ${dir} is not a directory; --state must name a directory`);

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    // The state dir (or a parent of it) is a file.
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') throw notADirectory(dirname(path));
    throw err;
  }
}

/**
 * The stored key as a KeyObject. A key the relay cannot verify (not P-256) is refused here, not
 * at every signed challenge, where the agent would retry forever. The message never quotes the file.
 */
function parseKey(path: string, pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = loadPrivateKey(pem);
  } catch (err) {
    throw new Error(
      `${path} does not hold a P-256 private key in PEM (${(err as Error).message}); restore it, or pair a new state dir`,
      { cause: err },
    );
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error(
      `${path} does not hold a P-256 private key (its key type is ${key.asymmetricKeyType}); restore it, or pair a new state dir`,
    );
  }
  return key;
}

/** The stored key, or a new one written to the state dir. */
export function loadOrCreateKey(dir: string): DeviceKeyPair {
  const pem = readIfExists(join(dir, KEY_FILE));
  if (pem !== undefined) {
    const spki = createPublicKey(parseKey(join(dir, KEY_FILE), pem)).export({ format: 'der', type: 'spki' });
    return { privateKeyPem: pem, publicKeySpkiBase64: spki.toString('base64') };
  }
  const fresh = generateDeviceKey();
  writeFileAtomic(join(dir, KEY_FILE), fresh.privateKeyPem);
  return fresh;
}

export function loadPrivateKeyFrom(dir: string): KeyObject {
  const pem = readIfExists(join(dir, KEY_FILE));
  if (pem === undefined) throw new Error(`no device key in ${dir} (${KEY_FILE} missing); pair first`);
  return parseKey(join(dir, KEY_FILE), pem);
}

/** The stored identity, or undefined if this state dir has never been paired. */
export function loadIdentity(dir: string): DeviceIdentity | undefined {
  const text = readIfExists(join(dir, IDENTITY_FILE));
  if (text === undefined) return undefined;
  const path = join(dir, IDENTITY_FILE);
  let parsed: Partial<DeviceIdentity> | null;
  try {
    parsed = JSON.parse(text) as Partial<DeviceIdentity> | null;
  } catch (err) {
    throw new Error(`${path} is not valid JSON (${(err as Error).message}); restore it, or pair a new state dir`, {
      cause: err,
    });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`${path} is not a JSON object; restore it, or pair a new state dir`);
  }
  for (const field of ['device_id', 'relay', 'relay_host', 'name'] as const) {
    if (typeof parsed[field] !== 'string') throw new Error(`${path} is missing "${field}"`);
  }
  return parsed as DeviceIdentity;
}

export function saveIdentity(dir: string, identity: DeviceIdentity): void {
  writeFileAtomic(join(dir, IDENTITY_FILE), JSON.stringify(identity, null, 2) + '\n');
}

// serve leaves its public URL and TLS fingerprint in the data dir so `phonebridge pair`
// can build the QR payload without repeating flags.
import { readFileSync, writeFileSync, renameSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

export interface RelayInfo {
  publicUrl: string;
  fingerprint?: string;
}

export function writeRelayInfo(dataDir: string, info: RelayInfo): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const tmp = join(dataDir, `.relay.json.${process.pid}`);
  writeFileSync(tmp, JSON.stringify(info), { mode: 0o600 });
  renameSync(tmp, join(dataDir, 'relay.json'));
}

export function readRelayInfo(dataDir: string): RelayInfo | undefined {
  try {
    return JSON.parse(readFileSync(join(dataDir, 'relay.json'), 'utf8')) as RelayInfo;
  } catch {
    return undefined;
  }
}

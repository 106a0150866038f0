// --tls-cert / --tls-key are checked before anything listens: uWebSockets.js answers a file it
// cannot use with "App construction failed" and no name, and a missing certificate with ENOENT.
// A refusal names the flag and the path, never what the file holds.
import { readFileSync } from 'node:fs';
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { ConfigError } from '../src/config.ts';

function readFlagFile(flag: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EACCES'
          ? 'is not readable'
          : code === 'EISDIR'
            ? 'is a directory'
            : `cannot be read (${code ?? 'error'})`;
    throw new ConfigError(`${flag} ${path} ${why}`);
  }
}

/** Throws a ConfigError naming the flag when the pair cannot serve TLS. */
export function checkTlsFiles(certPath: string, keyPath: string): void {
  const certPem = readFlagFile('--tls-cert', certPath);
  const keyPem = readFlagFile('--tls-key', keyPath);
  let cert: X509Certificate;
  try {
    // The first certificate of the file is the leaf (a chain may follow it).
    cert = new X509Certificate(certPem);
  } catch {
    throw new ConfigError(`--tls-cert ${certPath} is not a PEM certificate`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: keyPem, format: 'pem' });
  } catch {
    throw new ConfigError(`--tls-key ${keyPath} is not an unencrypted PEM private key`);
  }
  if (!cert.checkPrivateKey(key))
    throw new ConfigError(`--tls-key ${keyPath} is not the private key of the certificate in --tls-cert ${certPath}`);
}

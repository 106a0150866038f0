// A self-signed P-256 certificate for tests that serve TLS (the openssl CLI makes it).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** `<name>.crt` and `<name>.key` in `dir`, for CN `cn`, valid a day. */
export function selfSignedCert(dir: string, name: string, cn = name): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${cn}`,
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

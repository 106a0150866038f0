// An --smtp-url that is not an smtp:// or smtps:// URL (a typo, a mail provider's https:// API URL)
// stops `serve` with exit 2 and one line naming --smtp-url, its password replaced by `***`
// (src/config.ts) — not exit 1 with nodemailer's own words, which quote the URL, password and all.
import { afterAll, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { parseRelayConfig, ConfigError } from '../../src/config.ts';
import { tempDir } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';

const dirs: string[] = [];
const children: Child[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function serveExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const d = tempDir('pb-smtp-');
  dirs.push(d);
  const child = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', d, ...args]);
  children.push(child);
  const killer = setTimeout(() => child.proc.kill('SIGKILL'), 40_000);
  const started = await child.ready.then(
    () => true,
    () => false,
  );
  if (started) child.proc.kill('SIGTERM');
  const { code } = await child.exited;
  clearTimeout(killer);
  return { code, stderr: child.stderr.join('\n') };
}

it('serve --hosted with an --smtp-url that is not an SMTP URL: exit 2, one line naming --smtp-url, no password', async () => {
  const r = await serveExit(['--hosted', '--smtp-url', 'https://mailer:s3cret-smtp-pw@mail.example.com']);
  expect(r.stderr, 'the SMTP password is printed').not.toContain('s3cret-smtp-pw');
  expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
  expect(r.stderr).toBe(
    'phonebridge: --smtp-url must be an smtp://[user:password@]host[:port] or smtps://… URL, got https://mailer:***@mail.example.com/',
  );
}, 60_000);

it('smtp:// and smtps:// URLs are taken as given; text that is no URL with a host is refused without being echoed', () => {
  for (const url of ['smtp://mailer:pw@mail.example.com:587', 'smtps://mail.example.com'])
    expect(parseRelayConfig(['--smtp-url', url], {}).smtpUrl).toBe(url);
  for (const value of ['mailer:s3cret@mail.example.com', 'smtp://', 'mail.example.com', 'smtp://h:99999']) {
    let message = '';
    try {
      parseRelayConfig(['--smtp-url', value], {});
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    expect(message, value).toBe('--smtp-url must be an smtp://[user:password@]host[:port] or smtps://… URL');
  }
});

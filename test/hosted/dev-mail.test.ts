// Hosted mode on the embedded store with no SMTP configured (development): serve warns once,
// and the sign-in link is written to the log at info level — and nothing else secret is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { csrfOf, WebClient } from './helpers.ts';

const lines: string[] = [];
let relay: TestRelay;

beforeAll(async () => {
  relay = await startTestRelay(['--hosted'], {
    log: createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(l) } }),
  });
}, 60_000);
afterAll(async () => {
  await relay?.stop();
});

describe('hosted mode without --smtp-url', () => {
  it('logs a warning at start and the sign-in link at info; the link signs in; no session secret is logged', async () => {
    expect(lines.some((l) => l.includes('sign-in links are written to the log'))).toBe(true);
    const web = new WebClient(relay.url);
    const form = await web.get('/account/signin');
    expect((await web.post('/account/signin', { csrf: csrfOf(form.html), email: 'dev@example.com' })).status).toBe(200);
    const entry = lines.map((l) => JSON.parse(l)).find((j) => j.signinLink);
    expect(entry?.level).toBe(30);
    const link = new URL(entry.signinLink);
    expect(link.origin).toBe(relay.url);
    const page = await web.get(link.pathname + link.search);
    expect(
      (await web.post('/account/signin/link', { csrf: csrfOf(page.html), code: link.searchParams.get('code')! }))
        .status,
    ).toBe(303);
    const dash = await web.get('/account');
    expect(dash.html).toContain('dev@example.com');
    const session = web.jar.get('pb_session')!;
    expect(session.length).toBeGreaterThan(20);
    expect(lines.join('\n')).not.toContain(session);
  });
});

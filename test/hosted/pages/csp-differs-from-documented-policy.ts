// The hosted guide and the code must state the same Content-Security-Policy. They did not: every
// page was served with `connect-src 'self'` added, which exists for a second script the guide did
// not mention (the pairing page's watcher, /account/assets/pairing.js, polling
// /account/phones.json), while docs/HOSTED.md "Pages" gave the policy without it and spoke of "the
// one script, a pairing countdown". An operator or auditor checking the deployed header against
// the guide (or a proxy set to enforce the documented policy) got a mismatch. The code was right
// (src/hosted/web.ts CSP); the guide was corrected.
//
// Now the guide is the reference this test reads: the policy in the `Content-Security-Policy: …`
// code span of its "Pages" section, and the scripts (`/account/assets/….js`) that section names.
// Real relay, real Chromium: the header of each page as the browser received it (and the CSP
// constant in src/hosted/web.ts), and the scripts the pairing page loads.
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CSP } from '../../../src/hosted/web.ts';
import { newPage, signInOnPage } from '../browser.ts';
import { b, h } from './shared.ts';

/** The "Pages" section of docs/HOSTED.md: from its heading to the next. */
function pagesSection(): string {
  const guide = readFileSync(new URL('../../../docs/HOSTED.md', import.meta.url), 'utf8');
  const start = guide.indexOf('\n## Pages\n');
  expect(start).toBeGreaterThan(-1);
  const end = guide.indexOf('\n## ', start + 1);
  return guide.slice(start, end === -1 ? undefined : end);
}

const section = pagesSection();
const documented = /`Content-Security-Policy: ([^`]+)`/.exec(section)?.[1];
/** The scripts the section names, in the order it names them. */
const documentedScripts = [...new Set([...section.matchAll(/`(\/account\/assets\/[a-z-]+\.js)`/g)].map((m) => m[1]))];

describe('Content-Security-Policy of the hosted pages', () => {
  it("the guide states one policy and names the pairing page's scripts", () => {
    expect(documented).toBeDefined();
    expect(documented).toBe(CSP);
    expect(documentedScripts.length).toBeGreaterThan(0);
  });

  it('is the documented one, and the pairing page loads the documented scripts', async () => {
    const { ctx, page } = await newPage(b.get());
    try {
      const signin = await page.goto(`${h.url}/account/signin`);
      const email = `csp-${randomBytes(4).toString('hex')}@example.com`;
      await signInOnPage(page, h, email);
      const dashboard = await page.goto(`${h.url}/account`);
      const [pairing] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/account/pair')),
        page.getByRole('button', { name: 'Pair a phone' }).click(),
      ]);
      await page.getByTestId('pairing-code').waitFor();
      const scripts = await page.locator('script[src]').evaluateAll((els) => els.map((e) => e.getAttribute('src')));

      expect({
        signin: signin!.headers()['content-security-policy'],
        dashboard: dashboard!.headers()['content-security-policy'],
        pairing: pairing.headers()['content-security-policy'],
      }).toEqual({ signin: documented, dashboard: documented, pairing: documented });
      expect(scripts).toEqual(documentedScripts);
    } finally {
      await ctx.close();
    }
  });
});

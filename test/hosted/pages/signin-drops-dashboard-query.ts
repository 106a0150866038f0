// Regression test: the defect described below is fixed; this keeps it fixed.
// Defect: a signed-out person opening a filtered dashboard (`/account?selector=site=berlin`, a
// bookmark or a link a colleague sent) is sent to sign in with `next=/account`: the query is
// dropped, so after signing in they land on the unfiltered dashboard.
//
// Promise, docs/HOSTED.md "Pages": `POST /account/signin/link` "… goes to `next` (a path under
// `/account` only, and only in the browser that asked for the link …)", and `GET /account`
// "`?selector=site=berlin,…` filters them". `/account?selector=…` is a path under /account that
// this browser asked for; the consent page keeps its whole query in `next` the same way
// (src/hosted/oauth.ts: `next=${encodeURIComponent(`/account/authorize?${r.query}`)}`).
//
// Real relay, real Chromium, the same browser asks for and opens the link.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newPage, signInOnPage } from '../browser.ts';
import { b, h } from './shared.ts';

describe('sign-in from a filtered dashboard URL', () => {
  it('comes back to the same filtered dashboard', async () => {
    const { ctx, page } = await newPage(b.get());
    try {
      const email = `next-${randomBytes(4).toString('hex')}@example.com`;
      await page.goto(`${h.url}/account?selector=site%3Dberlin`);
      expect(new URL(page.url()).pathname).toBe('/account/signin');
      await signInOnPage(page, h, email);
      const landed = new URL(page.url());
      expect(landed.pathname).toBe('/account');
      expect(landed.searchParams.get('selector')).toBe('site=berlin');
      expect(await page.getByLabel('Labels').inputValue()).toBe('site=berlin');
    } finally {
      await ctx.close();
    }
  });
});

// Regression test: the defect described below is fixed; this keeps it fixed.
// Defect: a dashboard form whose body is over the 16 KiB form limit is answered with a raw JSON
// document (`{"error":"too_large",…}`, `Content-Type: application/json`, no CSP) instead of the
// HTML "Too large" page hosted mode has for it. The browser shows JSON text to the person.
//
// Promise, docs/HOSTED.md "Pages": "All pages are server-rendered HTML … and are served with
// `Content-Security-Policy: …`". The handler's own error policy says the same: src/hosted/request.ts
// `handle` — `if (err instanceof BodyTooLarge) return r.page(413, 'Too large', '<p class="error">The
// form was too large.</p>')` — but that branch never answers: `startBody` gives `Exchange.body` no
// `tooLarge` for pages, so the gateway's JSON 413 (src/gateway/http.ts defaultTooLarge) goes out
// first and `r.page` is a no-op on the finished exchange.
//
// Real relay, real Chromium: the person pastes a long text into "Phone name" (a field's maxlength
// is a hint the server must not rely on; here it is removed as any client can).
import { describe, expect, it } from 'vitest';
import { signedInPage } from './shared.ts';

describe('a dashboard form over the size limit', () => {
  it('is answered with the HTML "Too large" page, not JSON', async () => {
    const { ctx, page } = await signedInPage('big');
    try {
      const name = page.getByLabel('Phone name');
      await name.evaluate((el) => el.removeAttribute('maxlength'));
      await name.fill('x'.repeat(20_000));
      const [res] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/account/pair') && r.request().method() === 'POST'),
        page.getByRole('button', { name: 'Pair a phone' }).click(),
      ]);
      expect(res.status()).toBe(413);
      expect({
        type: res.headers()['content-type'],
        csp: res.headers()['content-security-policy'] !== undefined,
      }).toEqual({ type: 'text/html; charset=utf-8', csp: true });
      await page.waitForLoadState('load');
      expect(await page.title()).toBe('Too large · phonebridge');
    } finally {
      await ctx.close();
    }
  });
});

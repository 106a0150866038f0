// Regression test: the defect described below is fixed; this keeps it fixed.
// Defect: the "Key created" page is the direct answer to `POST /account/keys` (no
// Post/Redirect/Get) and the CSRF token is the session's, reusable. Reloading that page re-sends
// the form and silently mints a SECOND live API key (a different token, a second row counting
// against the plan's key cap) that the person never asked for and cannot tell apart from the first.
//
// Promise, docs/HOSTED.md "Pages": "`POST /account/keys` | a key for one phone with the ticked
// scopes; the token is shown once". One press of **Create key** must give one key; what a reload
// of the page shows must not be a fresh secret (the brief's "secrets shown once": a created key
// must not appear in HTML after reload). RFC 9110 §9.2.2: POST is not idempotent, so a user agent
// repeating it (reload, history) must not be able to mint credentials unnoticed — the standard
// remedy is 303 See Other to a GET page that shows the token once.
//
// Real relay, real Chromium: press Create key, then reload the page (headless Chromium re-posts;
// a desktop Chromium asks "Confirm Form Resubmission" and re-posts on Continue).
import { describe, expect, it } from 'vitest';
import { signedInPage, accountPhones, h } from './shared.ts';

describe('the "Key created" page', () => {
  it('reloaded, neither mints another key nor shows a new secret', async () => {
    const { ctx, page, email } = await signedInPage('reload');
    try {
      const { store, account } = await accountPhones(email, 'Pixel');
      await page.goto(`${h.url}/account`);

      await page.getByRole('button', { name: 'Create key' }).click();
      const first = await page.getByTestId('new-key').textContent();
      expect(first).toMatch(/^pb_/);
      const keysAfterPress = (await store.listTokens({ accountId: account.id })).filter((t) => t.via === 'key');
      expect(keysAfterPress).toHaveLength(1);

      await page.reload();
      await page.waitForLoadState('load');

      const keysAfterReload = (await store.listTokens({ accountId: account.id })).filter((t) => t.via === 'key');
      const shown = await page.getByTestId('new-key').count();
      expect({ keys: keysAfterReload.length, secretShownAgain: shown }).toEqual({ keys: 1, secretShownAgain: 0 });
    } finally {
      await ctx.close();
    }
  });
});

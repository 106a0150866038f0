// Regression test: the defect described below is fixed; this keeps it fixed.
// Defect: filtering the phone list with a label selector that matches no phone also removes the
// "Create key" form and tells the person "Pair a phone to create a key for it." although the
// account has a phone (it is even counted on the same page: "Phones: 1 of 3").
//
// Promise, docs/HOSTED.md "Pages", `GET /account`: "phones (…); `?selector=site=berlin,…` filters
// them with the API's selector syntax, …; **Pair a phone**; API keys and fleet keys (with their
// selector) (**Create key** with scopes, **Revoke**)". The selector filters the phone list; it does
// not make the account's phones disappear from key creation.
//
// Real relay, real Chromium.
import { describe, expect, it } from 'vitest';
import { signedInPage, accountPhones, h } from './shared.ts';

describe('dashboard label filter', () => {
  it('a selector matching no phone still leaves "Create key" for the account\'s phones', async () => {
    const { ctx, page, email } = await signedInPage('sel');
    try {
      await accountPhones(email, 'Pixel Berlin');

      await page.goto(`${h.url}/account`);
      expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(1);

      await page.getByLabel('Labels').fill('site=nowhere');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.getByTestId('selector-shown').waitFor();
      expect(await page.getByTestId('selector-shown').textContent()).toContain('0 of 1 phones match');

      const main = await page.locator('main').innerText();
      expect(main).not.toContain('Pair a phone to create a key for it.');
      expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(1);
    } finally {
      await ctx.close();
    }
  });
});

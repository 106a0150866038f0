// Regression test: the defect described below is fixed; this keeps it fixed.
// Defect: every phone row's button is named just "Remove" and every key row's just "Revoke": with
// two phones a screen-reader user listing the page's buttons (or a voice-control user saying
// "click Remove") hears/gets "Remove, Remove" and cannot tell which phone a button removes. The
// destructive action has no confirmation step either, so the wrong guess removes a phone.
//
// Standard: WCAG 2.2 SC 2.4.6 Headings and Labels (AA): "Headings and labels describe topic or
// purpose."; WAI-ARIA Authoring Practices / WCAG technique ARIA8 & G131: a control's accessible
// name identifies its purpose in context, e.g. "Remove Pixel A". docs/HOSTED.md "Pages" lists
// **Remove** per phone and **Revoke** per key as actions on a specific phone or key.
//
// Real relay, real Chromium, Chromium's accessibility tree (Playwright's role/name queries).
import { describe, expect, it } from 'vitest';
import { signedInPage, accountPhones, h } from './shared.ts';

describe('dashboard row actions', () => {
  it('each Remove / Revoke button names what it acts on', async () => {
    const { ctx, page, email } = await signedInPage('a11y');
    try {
      await accountPhones(email, 'Pixel A', 'Pixel B');
      await page.goto(`${h.url}/account`);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByTestId('new-key').waitFor();
      await page.goto(`${h.url}/account`);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByTestId('new-key').waitFor();
      await page.goto(`${h.url}/account`);

      // The accessible names of the row buttons as Chromium computes them.
      const snapshot = await page.locator('main').ariaSnapshot();
      const names = [...snapshot.matchAll(/button "([^"]*)"/g)].map((m) => m[1]);
      const rowButtons = names.filter((n) => /^(Remove|Revoke)\b/.test(n));
      expect(rowButtons).toHaveLength(4);
      expect(new Set(rowButtons).size).toBe(rowButtons.length);
    } finally {
      await ctx.close();
    }
  });
});

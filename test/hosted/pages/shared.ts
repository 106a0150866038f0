// The one hosted relay and Chromium that the page suites of test/hosted/pages.test.ts share:
// each suite signs in with an account of its own, so they need nothing else from each other, and
// one relay and one browser instead of one each saves their start-up per suite.
import { randomBytes } from 'node:crypto';
import { newPage, signInOnPage, useBrowser } from '../browser.ts';
import { useHostedRelay } from '../hosted-relay.ts';
import { startAccountPhone } from '../helpers.ts';

export const h = useHostedRelay();
export const b = useBrowser();

/** A new page signed in at /account as a fresh account (`prefix-<hex>@example.com`); the caller closes `ctx`. */
export async function signedInPage(prefix: string) {
  const { ctx, page } = await newPage(b.get());
  const email = `${prefix}-${randomBytes(4).toString('hex')}@example.com`;
  try {
    await page.goto(`${h.url}/account`);
    await signInOnPage(page, h, email);
  } catch (err) {
    await ctx.close();
    throw err;
  }
  return { ctx, page, email };
}

/** Phones of these names for the account `email` signed in as, paired and connected until the relay stops. */
export async function accountPhones(email: string, ...names: string[]) {
  const store = h.relay.relay.store.store;
  const account = (await store.accountByEmail(email))!;
  for (const name of names) h.phones.push(await startAccountPhone(store, h.url, account.id, name));
  return { store, account };
}

// Shared set-up for the browser tests: real headless Chromium (playwright-core) against a real
// hosted relay (test/hosted/hosted-relay.ts), signed in by a magic link from the real SMTP sink,
// exactly as browser.test.ts does.
import { afterAll, beforeAll } from 'vitest';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import type { HostedRelay } from './hosted-relay.ts';

/** Debian's headless Chromium, as every browser test here drives it. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-background-networking'],
  });
}

export function useBrowser(): { get: () => Browser } {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });
  return { get: () => browser! };
}

/** A new browser page; `dialogs` collects every JS dialog (alert/confirm/prompt) the page opens. */
export async function newPage(browser: Browser, opts: BrowserContextOptions = {}) {
  const ctx = await browser.newContext(opts);
  const page = await ctx.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  return { ctx, page, dialogs };
}

/** On the sign-in form: ask for the mail, open the link from the SMTP sink, press Sign in. */
export async function signInOnPage(page: Page, h: HostedRelay, email: string): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
  await page.getByText('Check your email').waitFor();
  await page.goto(await h.sink.nextLink(email));
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('heading', { name: 'Your phones' }).waitFor();
}

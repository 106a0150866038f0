// The one hosted relay and Chromium that the page suites of test/hosted/pages.test.ts share:
// each suite signs in with an account of its own, so they need nothing else from each other, and
// one relay and one browser instead of one each saves their start-up per suite.
import { useBrowser } from '../browser.ts';
import { useHostedRelay } from '../hosted-relay.ts';

export const h = useHostedRelay();
export const b = useBrowser();

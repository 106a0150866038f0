// HOSTED.md (Pages): "POST /account/signin/link | consumes the code, … goes to `next` (a path under
// `/account` only, and only in the browser that asked for the link; elsewhere `/account`)"; (4.
// Authorization) "Signed out: the sign-in page …, then back here — only in the browser that asked
// for the sign-in link". A person who presses "Email me a sign-in link" twice (the first mail is
// slow) and then opens the first mail, in the very browser that asked for both, must be taken to
// the consent page their client is waiting on, not dropped on the dashboard; the second link
// keeps its own. The browser keeps the bindings of the last SIGNIN_BROWSER_BINDINGS links it
// asked for (src/hosted/signin.ts); another browser never gets `next` (round-two.test.ts).
import { describe, expect, it } from 'vitest';
import { clientAddress, newEmail, useHostedRelay } from './hosted-relay.ts';
import { authorizeParams, csrfOf, pkce, registerClient, WebClient } from './helpers.ts';

const h = useHostedRelay({ args: ['--trust-proxy'] });

describe('a sign-in link’s next in the browser that asked for it', () => {
  it('is kept for each of two links that browser asked for, the first opened first', async () => {
    const who = newEmail('twice');
    const web = new WebClient(h.url, undefined, clientAddress());
    // A client waits for consent: its authorize URL sends the signed-out browser to sign in.
    const client = await registerClient(h.url, web.forwardedFor!);
    const authorize = `/account/authorize?${authorizeParams(h.url, client.body.client_id, pkce().challenge).toString()}`;
    const toSignin = await web.get(authorize);
    expect(toSignin.status).toBe(303);
    const form = await web.get(toSignin.location!);
    const next = new URL(toSignin.location!, h.url).searchParams.get('next')!;
    expect(next).toBe(authorize);
    const csrf = csrfOf(form.html);
    expect((await web.post('/account/signin', { csrf, email: who, next })).status).toBe(200);
    const first = new URL(await h.sink.nextLink(who));
    // The mail seems slow: the same person, same browser, asks again.
    expect((await web.post('/account/signin', { csrf, email: who, next })).status).toBe(200);
    const second = new URL(await h.sink.nextLink(who));

    const page = await web.get(first.pathname + first.search);
    expect(page.status).toBe(200);
    const done = await web.post('/account/signin/link', {
      csrf: csrfOf(page.html),
      code: first.searchParams.get('code')!,
    });
    expect(done.status).toBe(303);
    expect(done.location).toBe(next);

    const again = await web.get(second.pathname + second.search);
    expect(again.status).toBe(200);
    const secondDone = await web.post('/account/signin/link', {
      csrf: csrfOf(again.html),
      code: second.searchParams.get('code')!,
    });
    expect({ status: secondDone.status, location: secondDone.location }).toEqual({ status: 303, location: next });
  });
});

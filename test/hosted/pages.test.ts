// The hosted pages in a real Chromium against one real hosted relay (test/hosted/pages/shared.ts):
// each suite below is a module of its own under test/hosted/pages/, with the promise it checks
// in its header.
import './pages/shared.ts';
import './pages/reload-of-key-created-page-mints-another-key.ts';
import './pages/selector-without-match-hides-create-key.ts';
import './pages/signin-drops-dashboard-query.ts';
import './pages/row-buttons-share-one-accessible-name.ts';
import './pages/oversized-form-answers-json-not-page.ts';
import './pages/csp-differs-from-documented-policy.ts';
import './pages/account-unknown-path.ts';

// `prepare` (run by npm install / npm ci): builds the initdb template that lets a new embedded
// data dir start in ~2 s instead of ~7 s (src/store/database/template.ts). Never fails the
// install: without the template, the first start of a new data dir just runs initdb itself.
import { buildTemplate } from '../src/store/database/template.ts';

const t0 = Date.now();
try {
  const path = await buildTemplate();
  console.log(`phonebridge: embedded database template ready (${path}, ${Date.now() - t0} ms)`);
} catch (err) {
  console.warn(`phonebridge: no embedded database template (${(err as Error).message}); new data dirs will run initdb`);
}

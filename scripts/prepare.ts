// `prepare` (run by npm install / npm ci): builds the prepared embedded data dir that lets a new
// data dir start in 1.2–2.4 s of CPU instead of 4.6–7.7 s (docs/decisions/0252). Never fails
// the install: without it, the first start of a new data dir runs initdb and the migrations itself.
import { buildTemplate } from '../src/store/template-build.ts';

const t0 = Date.now();
try {
  const path = await buildTemplate();
  console.log(`phonebridge: embedded database template ready (${path}, ${Date.now() - t0} ms)`);
} catch (err) {
  console.warn(
    `phonebridge: no embedded database template (${(err as Error).message}); new data dirs will run initdb and the migrations`,
  );
}

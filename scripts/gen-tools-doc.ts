// Regenerates docs/TOOLS.md from the tools the phone server registers.
// Run: npx tsx scripts/gen-tools-doc.ts
import { writeFileSync } from 'node:fs';
import { TOOLS_DOC_PATH, renderToolsDoc } from '../src/device/tools/docs.ts';

writeFileSync(new URL(`../${TOOLS_DOC_PATH}`, import.meta.url), await renderToolsDoc());
console.log(`wrote ${TOOLS_DOC_PATH}`);

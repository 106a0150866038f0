import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TOOLS_DOC_COMMAND, TOOLS_DOC_PATH, renderToolsDoc } from './docs.ts';

describe(TOOLS_DOC_PATH, () => {
  it('matches the registered tools', async () => {
    const committed = readFileSync(new URL(`../../../${TOOLS_DOC_PATH}`, import.meta.url), 'utf8');
    const fresh = await renderToolsDoc();
    if (committed !== fresh) {
      expect.fail(
        `${TOOLS_DOC_PATH} is stale: the registered tools changed. Regenerate it with \`${TOOLS_DOC_COMMAND}\` and commit it.`,
      );
    }
    expect(fresh).toContain('| `tap` | `devices:act` |');
  });
});

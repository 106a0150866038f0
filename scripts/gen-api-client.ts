// Writes test/fleet/generated/api-v1.ts: the TypeScript types openapi-typescript generates from
// the /api/v1 OpenAPI document (itself generated from the handlers' zod schemas). The typed
// client in test/fleet/api.test.ts compiles against it, and that test fails when it is stale.
// Run: node --import tsx scripts/gen-api-client.ts
import { writeFileSync } from 'node:fs';
import { generateApiTypes } from '../test/fleet/api-types.ts';

writeFileSync(new URL('../test/fleet/generated/api-v1.ts', import.meta.url), await generateApiTypes());

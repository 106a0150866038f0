#!/usr/bin/env node
// Runs the TypeScript sources directly (tsx's ESM loader), so a checkout needs no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../services/cli.ts');
await main(process.argv.slice(2));

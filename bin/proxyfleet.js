#!/usr/bin/env node
// `npx proxyfleet admin ...`: the TypeScript CLI runs on Node 24's type stripping (api/src/cli).
import { run } from '../api/src/cli/run.ts';

await run();

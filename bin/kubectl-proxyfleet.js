#!/usr/bin/env node
// `kubectl proxyfleet ...`: kubectl runs any kubectl-<name> on PATH as a plugin. The TypeScript
// (controllers/src/plugin) runs on Node 24's type stripping; an older Node is told so, plainly.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `error: kubectl-proxyfleet needs Node 24 or later (this is Node ${process.versions.node}); ` +
      'put Node 24 first on PATH (npm install puts it in node_modules/.bin)\n',
  );
  process.exit(1);
}
const { run } = await import('../controllers/src/plugin/main.ts');
process.exitCode = await run(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
});

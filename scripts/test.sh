#!/usr/bin/env bash
# `npm test`: the whole gate: types, type-checked lint with the import boundaries, formatting,
# unused files and exports (knip), then every jest project (unit, integration, kube).
# With arguments it is a focused jest run and nothing else, e.g.
#   npm test -- --selectProjects unit      (seconds: no database, no processes)
#   npm test -- api/src/modules/admin      (one feature's tests)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  npm run -s typecheck
  npm run -s lint
  npm run -s format:check
  npm run -s knip
fi
exec npm run -s jest -- "$@"

#!/usr/bin/env bash
# Installs the browser benchmark's peers (bench/browser/package-lock.json: wllama, and
# playwright-core to drive Debian's Chromium) into bench/browser/node_modules. Only
# scripts/browser-cpu-bench.sh uses them; the test suite never installs or needs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/bench/browser"
npm ci --no-audit --no-fund
echo "fetch-browser-bench.sh: installed $(node -p "require('./node_modules/@wllama/wllama/package.json').version") of @wllama/wllama"

#!/usr/bin/env bash
# Rebuilds the frontend and fails when the committed bundle differs from what the source builds.
# Run after `npm ci` (CI does: scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")"
committed=../tb_attn_plugin/static/index.js
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node build.mjs --out "$tmp/index.js" >/dev/null
if [ ! -f "$committed" ]; then
  echo "check-bundle: $committed is missing; run 'npm run build' in frontend/ and commit it" >&2
  exit 1
fi
if ! cmp -s "$tmp/index.js" "$committed"; then
  echo "check-bundle: $committed differs from a fresh build of frontend/src;" >&2
  echo "  run 'cd frontend && npm ci && npm run build' and commit tb_attn_plugin/static/index.js" >&2
  exit 1
fi
echo "check-bundle: tb_attn_plugin/static/index.js matches frontend/src"

#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine, then runs them. README and .ci/run call this.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests get a virtualenv of their own, so the user's .venv (the README's first command:
# [plugin,collector]) keeps exactly what it had: test-only packages never land there.
VENV=${VENV:-.venv-test}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# The extras (setup.py) the tests use, one per line; add yours here.
TEST_EXTRAS=(
  plugin collector
  remote        # fsspec URLs and the s3:// logdir test
  fast          # ISA-L gzip
  test          # pytest, hypothesis, moto, torch-tb-profiler, ...
  integrations  # HF transformers, Lightning callbacks
  dask          # --dask and TB_ATTN_DASK_SCHEDULER on a real LocalCluster
)
# torch==2.13.0 takes the CPU wheel on disk; a bare "torch" would pull a CUDA build of several GB,
# so it is pinned on every install line.
"$VENV/bin/pip" install -q torch==2.13.0
"$VENV/bin/pip" install -q torch==2.13.0 -e ".[$(IFS=,; echo "${TEST_EXTRAS[*]}")]"
# The install compiles the C event scanner (tb_attn_plugin/trace/_scanner.c) and the snapshot
# decoder (tb_attn_plugin/memory/_snapshot_decode.c) with gcc and brings
# ISA-L's gzip ([fast]); the engine works without either, but here their absence must fail the tests
# of those paths (tests/test_scanner.py, tests/test_bad_input.py), not skip them.
export TB_ATTN_REQUIRE_NATIVE=1
# The Attention tab (frontend/): Debian's chromium for the browser test (never a downloaded browser),
# the pinned npm packages, the unit tests, and a check that the committed bundle is what the source builds.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "scripts/test.sh: /usr/bin/chromium is missing and this is not root: tests/test_browser.py will skip" >&2
  fi
fi
(cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run --silent typecheck && npm test --silent && bash check-bundle.sh)
# The lint (ruff.toml: pyflakes and syntax errors) over the Python of the repository.
"$VENV/bin/ruff" check --quiet .
# The type check of format/ and report/ (mypy.ini).
"$VENV/bin/mypy" --no-error-summary
if [ -x /usr/bin/chromium ]; then export TB_ATTN_REQUIRE_BROWSER=1; fi  # a missing piece fails the browser test
exec "$VENV/bin/python" -m pytest -q "$@"

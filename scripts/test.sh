#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine, then runs them. README and .ci/run call this.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# torch==2.13.0 takes the CPU wheel on disk; a bare "torch" would pull a CUDA build of several GB.
"$VENV/bin/pip" install -q torch==2.13.0
"$VENV/bin/pip" install -q -e '.[plugin,collector,remote,test]'
exec "$VENV/bin/python" -m pytest -q "$@"

"""What every browser test shares: whether node, the frontend's packages and chromium are here,
where screenshots go, a real ``tensorboard`` serving the tab, and one frontend/browser/*.mjs script
run against it (its checks print "ok N - ..." and end with "all N checks passed")."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_plugin_tensorboard import poll, tensorboard_process

ROOT = Path(__file__).resolve().parent.parent
FRONTEND = ROOT / "frontend"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (FRONTEND / "node_modules" / "playwright-core").is_dir():
        return "frontend/node_modules is missing (run npm ci in frontend/)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    if not (ROOT / "tb_attn_plugin" / "static" / "index.js").is_file():
        return "the frontend bundle tb_attn_plugin/static/index.js is missing"
    return None


def require_browser() -> None:
    """Skip when a piece is missing; fail instead where TB_ATTN_REQUIRE_BROWSER=1 (scripts/test.sh)."""
    why = missing()
    if why:
        if os.environ.get("TB_ATTN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser test cannot run: {why}")
        pytest.skip(why)


def updating_screenshots() -> bool:
    return os.environ.get("TB_ATTN_UPDATE_SCREENSHOTS") == "1"


def shots_dir(tmp_path: Path) -> Path:
    """docs/screenshots/ (the README's) with TB_ATTN_UPDATE_SCREENSHOTS=1, else a scratch folder."""
    return ROOT / "docs" / "screenshots" if updating_screenshots() else tmp_path / "shots"


@contextlib.contextmanager
def serving(logdir: Path, tmp: Path):
    """A real tensorboard over ``logdir`` with the Attention tab enabled: yields (base URL, process)."""
    with tensorboard_process(logdir, tmp, settle_s="0", reload_s="2") as (base, proc):
        poll(f"{base}/data/plugins_listing", lambda d: d.get("tb_attn", {}).get("enabled"), proc=proc)
        yield base, proc


def run_script(script: str, base: str, shots: Path, timeout: float = 600, **env: str) -> str:
    """Run frontend/browser/``script`` against ``base``; its stdout, after checking that every check passed."""
    env = dict(os.environ, TB_URL=base, SHOTS_DIR=str(shots), CHROMIUM=CHROMIUM, **env)
    proc = subprocess.run(["node", f"browser/{script}"], cwd=FRONTEND, env=env, capture_output=True, text=True,
                          timeout=timeout)
    print(proc.stdout[-20000:])
    print(proc.stderr[-8000:], file=sys.stderr)
    assert proc.returncode == 0, f"browser checks failed:\n{proc.stderr[-4000:]}"
    assert "all " in proc.stdout and "checks passed" in proc.stdout
    return proc.stdout

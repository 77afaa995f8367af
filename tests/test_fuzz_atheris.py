"""Coverage-guided fuzzing of the reader and the analysis with atheris (libFuzzer), seeded with real traces.

Not part of the regular suite: atheris is not a test dependency, so under pytest this file only runs a
short bounded session when atheris happens to be installed, and skips otherwise. Run it for longer by hand:

    python3 -m venv bench/out/venvs/atheris
    bench/out/venvs/atheris/bin/pip install atheris msgspec && bench/out/venvs/atheris/bin/pip install --no-deps -e .
    bench/out/venvs/atheris/bin/python tests/test_fuzz_atheris.py -max_total_time=600 -max_len=200000

Any exception other than TraceError, or a report with a non-finite number, is a crash and libFuzzer
writes the input to ./crash-<sha1>.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = ["tl_mi300x_torch_compile_small", "tl_h100_bert_small_sdpa_flash"]


def _finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return True


def main(argv: list[str]) -> None:
    import atheris

    with atheris.instrument_imports():
        from tb_attn_plugin.format.errors import TraceError
        from tb_attn_plugin.report.build import analyze_file

    workdir = tempfile.mkdtemp(prefix="tb-attn-atheris-")
    path = os.path.join(workdir, "t.pt.trace.json")

    def one(data: bytes) -> None:
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            r = analyze_file(path)
        except TraceError as exc:
            if not str(exc).startswith(path + ": ") or "\n" in str(exc):
                raise AssertionError(f"badly formed error: {exc!r}") from None
            return
        if not _finite(r):
            raise AssertionError("non-finite number in the report")

    corpus = os.path.join(workdir, "corpus")
    os.makedirs(corpus)
    shared = os.environ.get("TB_ATTN_SHARED_TRACES", os.path.join(HERE, "..", "..", "shared", "traces"))
    for name in SEEDS:
        p = os.path.join(shared, f"{name}.json.gz")
        if os.path.exists(p):
            with open(os.path.join(corpus, name), "wb") as fh:
                fh.write(gzip.decompress(open(p, "rb").read())[:200_000])
    atheris.Setup([sys.argv[0], corpus, *argv], one)
    atheris.Fuzz()


def test_atheris_short_session(tmp_path):
    import pytest

    if importlib.util.find_spec("atheris") is None:
        pytest.skip("atheris is not installed (optional)")
    proc = subprocess.run([sys.executable, __file__, "-runs=300", "-max_len=200000", "-rss_limit_mb=4096"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    crashes = list(tmp_path.glob("crash-*"))
    assert proc.returncode == 0 and not crashes, proc.stderr[-3000:]


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    main(sys.argv[1:])

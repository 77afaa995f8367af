"""The eager-attention verdict names the largest stage of the eager calls (scale & mask, dropout, other or a
projection when one of them outweighs softmax), never a stage only other calls ran."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.verdicts import STAGE_WORDS
from tests.conftest import recorded_trace, shared_trace

CORE_SKIP = ("qkv_proj", "out_proj")


def _eager_verdict(r) -> str:
    return next(v["message"] for v in r["verdicts"] if v["id"] == "eager_attention")


def _eager_core(r) -> Counter:
    key = f"{r['time_basis']}_us"
    c: Counter = Counter()
    for lay in r["layers"]:
        if "eager" in lay.implementation.split("+"):
            for s in lay.stages:
                if s.stage not in CORE_SKIP:
                    c[s.stage] += getattr(s, key)
    return c


def _eager_all(r) -> Counter:
    key = f"{r['time_basis']}_us"
    c: Counter = Counter()
    for lay in r["layers"]:
        if "eager" in lay.implementation.split("+"):
            for s in lay.stages:
                c[s.stage] += getattr(s, key)
    return c


def _expected(core: Counter) -> str:
    """What the verdict should name: the largest stage when it is neither a matmul nor softmax and
    outweighs softmax (scale & mask, dropout, other, a projection); else softmax's share is the telling number."""
    top = max(core, key=core.get)
    return top if top not in ("qk_matmul", "av_matmul") and core[top] > core["softmax"] else "softmax"


def _named(message: str) -> str:
    """The stage the verdict names: 'softmax', or the stage whose words precede 'takes the most'."""
    m = re.search(r": (.+?) takes the most, (\d+)% of", message)
    if not m:
        assert re.search(r": softmax takes \d+% of", message), message
        return "softmax"
    return next(s for s, w in STAGE_WORDS.items() if w == m.group(1))


def test_the_verdict_names_the_eager_calls_largest_stage(tmp_path):
    """A real CPU training step of eager attention: the stage named is the largest of its core."""
    r = analyze_file(str(recorded_trace("eager")))
    every = _eager_all(r)
    assert _named(_eager_verdict(r)) == _expected(every), (_eager_verdict(r), every)


def _merged(a, b, out):
    """Two real traces as one: b's events after a's, on processes and threads of their own."""
    da, db = (json.loads(gzip.decompress(p.read_bytes())) for p in (a, b))
    end = max(e.get("ts", 0) + e.get("dur", 0) for e in da["traceEvents"] if isinstance(e.get("ts"), (int, float)))
    first = min(e["ts"] for e in db["traceEvents"] if isinstance(e.get("ts"), (int, float)))
    for e in db["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] - first + end + 1000
        for k in ("pid", "tid"):
            if isinstance(e.get(k), int):
                e[k] += 1_000_000
        args = e.get("args")
        if isinstance(args, dict):
            for k in ("External id", "correlation", "Record function id", "Ev Idx"):
                if isinstance(args.get(k), int):
                    args[k] += 10_000_000
    da["traceEvents"] += db["traceEvents"]
    out.write_bytes(gzip.compress(json.dumps(da).encode()))
    return out


def test_a_run_of_eager_and_fused_calls_names_a_stage_of_the_eager_calls(tmp_path):
    """Eager and SDPA-fused calls in one trace: the fused calls' time is no part of the eager verdict
    (it read 'the fused kernel takes the most' for the eager layers of such a model)."""
    r = analyze_file(str(_merged(recorded_trace("eager"), recorded_trace("sdpa"), tmp_path / "mixed.json.gz")))
    impls = Counter(i for lay in r["layers"] for i in lay.implementation.split("+"))
    assert impls["eager"] and impls["cpu_fused"], impls
    msg = _eager_verdict(r)
    assert "fused kernel" not in msg and "of their attention time" in msg, msg
    assert _named(msg) == _expected(_eager_all(r)), (msg, _eager_all(r))


def test_flux_eager_t5_layers_name_their_largest_stage():
    """The FLUX.1 trace (T5 eager attention beside ck/aotriton fused calls): the T5 layers' largest stage is named
    with its share (it said the fused kernel, which no T5 call runs, then scale & mask while the QKV projection
    took more)."""
    r = analyze_file(str(shared_trace("tl_mi300x_xdit_flux1_aiter_fmha_hipgraph")))
    msg = _eager_verdict(r)
    every = _eager_all(r)
    eager_total = sum(s.gpu_us for lay in r["layers"] if lay.implementation == "eager" for s in lay.stages)
    top = max(every, key=every.get)
    assert top == "qkv_proj" and every["qkv_proj"] > every["scale_mask"] > every["softmax"]
    assert msg.startswith("eager attention in 24 calls: the QKV projection takes the most, "), msg
    assert f"{every['qkv_proj'] / eager_total * 100:.0f}% of their attention time" in msg
    assert f"(softmax {every['softmax'] / eager_total * 100:.0f}%)" in msg

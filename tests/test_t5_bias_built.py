"""Issue 46 item 1 ("a mask built per call partly counted"): T5's relative position bias in FLUX's T5 encoder
(transformers modeling_t5.py compute_bias and _relative_position_bucket), rebuilt in the first T5Attention call.
A small walker over the raw events finds the kernels that compute_bias launched (its Python frame, the runtime
launches on its thread inside it, their kernels by correlation id) and checks what the reading says of them."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache


from tests.conftest import shared_trace

FLUX = "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph"


@lru_cache(maxsize=1)
def raw_bias_kernels() -> tuple[str, dict[int, str]]:
    """(the T5Attention call holding compute_bias, {correlation id: kernel name}) from the raw events alone."""
    with gzip.open(shared_trace(FLUX), "rt") as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    (cb,) = [e for e in ev if e.get("cat") == "python_function" and e["name"].endswith(": compute_bias")]
    lo, hi = cb["ts"], cb["ts"] + cb["dur"]
    (call,) = [e for e in ev if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: T5Attention")
               and e["ts"] <= lo and hi <= e["ts"] + e["dur"]]
    launched = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime" and e["tid"] == cb["tid"]
                and lo <= e["ts"] <= hi and "correlation" in e.get("args", {})}
    kernels = {e["args"]["correlation"]: e["name"] for e in ev if e.get("cat") == "kernel"
               and e["args"].get("correlation") in launched}
    return call["name"], kernels


def test_compute_bias_launches_22_kernels_in_the_first_t5_call():
    """The bias is built once, in layer 0 (has_relative_attention_bias): two aranges, the bucket's integer and
    float arithmetic (sub, gt, abs, lt, log, div, mul, three casts, full_like, minimum, where, add_) and the
    embedding's gather: 22 kernels, correlation ids 578..598 and 601 (599, 600 launch nothing)."""
    call, kernels = raw_bias_kernels()
    assert call == "nn.Module: T5Attention_0"
    assert sorted(kernels) == [*range(578, 599), 601]
    assert "arange_cuda_out" in kernels[578] and "vectorized_gather_kernel" in kernels[601]


def test_the_reading_counts_every_bias_kernel_as_mask_built_per_call():
    from tb_attn_plugin.report.build import analyze_file

    _, kernels = raw_bias_kernels()
    r = analyze_file(str(shared_trace(FLUX)))
    row = next(g for g in r["reading"] if g["layer_type"] == "T5Attention")
    mask = next(x for x in row["expected"]["extras"] if x["cause"] == "mask_built_per_call")
    assert round(mask["per_call"] * row["calls"]) == len(kernels)


def _bucket_bias_attention(torch):
    """A layer of our own (no T5 name, no compute_bias frame): QK^T, then a bias from integer position indices
    (aranges, their difference, a bucket by comparisons and a float log chain cast back, an embedding lookup)
    added to the scores, an explicit bool [B, 1, S, S] mask by masked_fill, softmax, AV."""
    from torch import nn

    class RelPosAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Embedding(16, 2)

        def forward(self, q, k, v, mask):
            s = q.shape[2]
            scores = torch.matmul(q, k.transpose(-1, -2))
            rel = torch.arange(s)[None, :] - torch.arange(s)[:, None]
            far = (torch.log(rel.abs().float() + 1.0) * 2.0).to(torch.long)
            bucket = torch.where(rel.abs() < 4, rel.abs(), torch.minimum(far, torch.full_like(far, 7)))
            bucket = bucket + (rel > 0).to(torch.long) * 8
            scores = scores + self.table(bucket).permute(2, 0, 1)[None]
            scores = scores.masked_fill(mask, float("-inf"))
            return torch.matmul(torch.softmax(scores, dim=-1), v)

    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    mask = torch.zeros(1, 1, 16, 16, dtype=torch.bool)
    mask[..., -1] = True
    m = RelPosAttention()
    for _ in range(3):
        m(q, k, v, mask)


FREE = {"aten::view", "aten::unsqueeze", "aten::as_strided", "aten::reshape", "aten::empty", "aten::empty_strided",
        "aten::empty_like", "aten::select", "aten::permute", "aten::to", "aten::_to_copy", "aten::expand"}


def raw_bias_work(evs: list[dict]) -> list[int]:
    """Per call of the layer, the ops that do the bias's work, from the raw events: the cpu ops from its first
    aten::arange to the end of its aten::embedding that are no view or allocation, do no work through a
    child, and are no Python number's conversion (a copy_ of 0-dim tensors)."""
    ops = sorted((e for e in evs if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))

    def busy(e: dict) -> bool:
        dims = e["args"].get("Input Dims") or [[]]
        return e["name"] not in FREE and not (e["name"] == "aten::copy_" and dims[0] == [])

    out = []
    for call in (e for e in evs if e.get("cat") == "python_function"
                 and e["name"].startswith("nn.Module: RelPosAttention")):
        inside = [e for e in ops if call["ts"] <= e["ts"] <= call["ts"] + call["dur"]]
        lo = next(e["ts"] for e in inside if e["name"] == "aten::arange")
        emb = next(e for e in inside if e["name"] == "aten::embedding")
        span = [e for e in inside if lo <= e["ts"] <= emb["ts"] + emb["dur"]]
        out.append(sum(busy(e) and not any(busy(d) for d in span if d is not e and e["ts"] <= d["ts"]
                                           and d["ts"] + d["dur"] <= e["ts"] + e["dur"]) for e in span))
    return out


def test_index_arithmetic_of_any_layer_reads_as_mask_built_and_the_scores_mask_does_not(tmp_path):
    """The rule is the inputs' dtypes and shapes, not T5's names: a layer of our own's position bias (integer
    ops, their float chain, the lookup) is a mask built per call; the masked_fill on the [B, H, S, S] scores
    (a bool mask, but float scores of rank 4) stays the mask step, its copy a hidden copy."""
    from tb_attn_plugin.report.build import analyze_file
    from tests.test_causes_earned import _events, _record_modules

    path = _record_modules(tmp_path, "relpos", _bucket_bias_attention)
    evs = _events(path)
    types = {e["name"]: e["args"]["Input type"] for e in evs if e.get("cat") == "cpu_op"
             and e["name"] in ("aten::sub", "aten::log", "aten::masked_fill")}
    assert types["aten::sub"][:2] == ["long int", "long int"] and types["aten::log"] == ["float"]
    assert "bool" in types["aten::masked_fill"]
    r = analyze_file(str(path))
    (row,) = [g for g in r["reading"] if g["layer_type"] == "RelPosAttention"]
    e = row["expected"]
    causes = {x["cause"]: x for x in e["extras"]}
    mask = causes["mask_built_per_call"]
    work = raw_bias_work(evs)
    assert len(work) == row["calls"] == 3 and mask["per_call"] == work[0] == work[1] == work[2] == 20
    assert {"aten::sub", "aten::abs", "aten::log", "aten::lt"} & set(mask["names"])
    assert "dtype_cast" not in causes  # the bias's casts (to float and back, bool to long) are its own
    assert causes["repeated_step"]["names"] == ["aten::masked_fill_"]  # the bias add is the mask step
    assert not {"aten::gt", "aten::abs", "aten::lt", "aten::log", "aten::sub"} & set(e["outside"]["names"])
    assert "hidden_copy" in causes and "aten::masked_fill" not in mask["names"]
    assert "mask" in e["expected_steps"]

"""The claims audit (issue 46, "Done when"): tests/claims_audit.py's walker finds every claim of the reading borne
out by the raw events on each shared trace and each recorded CPU fixture, and rejects a report in which any one
kind of claim was changed (a ran count, a cause, an evidence id, an occupancy figure, a fingerprint field,
why-not-flash on the CPU)."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import msgspec
import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.claims_audit import audit
from tests.conftest import recorded_trace, shared_trace
from tests.recorded import ROLES
from tests.test_expected_claims import ALL_SHARED


def _doc(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path) as f:
        return json.load(f)


def _read(path: Path) -> tuple[dict, dict]:
    # the report as --json prints it: the audit walks the JSON a reader gets, and perturbs it as dicts
    return _doc(path), msgspec.to_builtins(analyze_file(str(path)))


@pytest.mark.parametrize("name", ALL_SHARED)
def test_the_audit_passes_on_every_shared_trace(name):
    doc, r = _read(shared_trace(name))
    assert audit(doc, r) == []


CPU_MODES = ("sdpa", "math", "eager", "mha", "tagged")


def test_the_audit_passes_on_every_recorded_cpu_fixture(cpu_traces):
    """Both sets of CPU recordings: tests/cpu_models.py (training steps, collector-free) and tests/recorded.py's roles."""
    assert set(cpu_traces) == set(CPU_MODES)
    paths = dict(cpu_traces) | {f"recorded/{role}": recorded_trace(role) for role in (*ROLES, "tail")}
    read = 0
    for label, path in paths.items():
        doc, r = _read(path)
        assert audit(doc, r) == [], label
        read += sum(g["expected"] is not None for g in r["reading"])
    assert read >= 8  # the audit saw readings, not empty reports


# --- each kind of claim perturbed: the audit must say so ---------------------------------------------------

def _owlv2():
    return _read(shared_trace("tl_h100_owlv2_eager_bmm_softmax"))


def _bert():
    return _read(shared_trace("tl_h100_bert_small_sdpa_flash"))


def _rejects(doc, r, change) -> list[str]:
    assert audit(doc, r) == []
    bad = copy.deepcopy(r)
    change(bad)
    return audit(doc, bad)


def _row(r, layer_type):
    return next(g for g in r["reading"] if g["layer_type"] == layer_type)


@pytest.mark.parametrize("delta", [1, -1])
def test_a_ran_count_changed_is_rejected(delta):
    doc, r = _bert()

    def change(bad):
        e = _row(bad, "BertAttention")["expected"]
        for k in ("ran", "ran_min", "ran_max"):  # the whole range moved, so only the raw events can tell
            e[k] += delta
    assert any("kernels each" in p for p in _rejects(doc, r, change))


def test_a_ran_count_that_disagrees_with_its_summary_is_rejected():
    doc, r = _owlv2()

    def change(bad):
        _row(bad, "Owlv2Attention")["expected"]["summary"] = "expected 3 kernels per forward, ran 8 (from 7 to 9)"
    assert any("summary says ran 8" in p for p in _rejects(doc, r, change))


def test_a_cause_changed_is_rejected():
    doc, r = _owlv2()

    def change(bad):
        x = next(x for x in _row(bad, "Owlv2Attention")["expected"]["extras"] if x["cause"] == "layout_copy")
        x["cause"] = "kv_cache_write"
    assert any("is a kv_cache_write" in p for p in _rejects(doc, r, change))


def test_an_evidence_id_changed_is_rejected():
    doc, r = _owlv2()
    corrs = {(e.get("args") or {}).get("correlation") for e in doc["traceEvents"]}
    missing = max(c for c in corrs if isinstance(c, int)) + 1
    # a real kernel, but of another name: the first softmax kernel's correlation id
    softmax = next(e["args"]["correlation"] for e in doc["traceEvents"]
                   if e.get("cat") == "kernel" and "SoftMaxForward" in e["name"])

    for wrong, said in ((missing, "is no kernel of the trace"), (softmax, "none of its names")):
        def change(bad, wrong=wrong):
            x = next(x for x in _row(bad, "Owlv2Attention")["expected"]["extras"] if x["cause"] == "layout_copy")
            x["evidence"]["kernel_correlations"][0] = wrong
        assert any(said in p for p in _rejects(doc, r, change)), said


def test_a_cpu_evidence_op_changed_is_rejected(cpu_traces):
    doc, r = _read(cpu_traces["eager"])
    extras = [x for g in r["reading"] if g["expected"] for x in g["expected"]["extras"] if x["evidence"]["op_starts_us"]]
    assert extras
    x0 = extras[0]
    other = next(float(e["ts"]) for e in doc["traceEvents"]
                 if e.get("cat") == "cpu_op" and e["name"] not in x0["names"])

    def change(bad):
        for g in bad["reading"]:
            for x in (g["expected"] or {}).get("extras", []):
                if x["evidence"]["op_starts_us"]:
                    x["evidence"]["op_starts_us"][0] = other
                    return
    assert any("no op of its names starts at" in p for p in _rejects(doc, r, change))


def _occ(bad, pred):
    return next(o for lay in bad["layers"] for o in lay["occupancy"] if pred(o))


def test_an_occupancy_figure_changed_is_rejected():
    doc, r = _owlv2()

    def change(bad):
        o = _occ(bad, lambda o: o["configurations"] == 1 and o["theoretical_pct"])
        o["theoretical_pct"] = round(o["theoretical_pct"] + 12.5, 2) if o["theoretical_pct"] < 80 else 50.0
    assert any("the calculator gives" in p for p in _rejects(doc, r, change))


def test_a_zero_estimate_cause_changed_is_rejected():
    doc, r = _owlv2()

    def change(bad):
        o = _occ(bad, lambda o: o["zero_estimate_cause"] == "shared memory over the default limit")
        o["zero_estimate_cause"] = "idle SMs"
    assert any("0% blamed on idle SMs" in p for p in _rejects(doc, r, change))


def test_a_zero_estimates_evidence_changed_is_rejected():
    doc, r = _owlv2()

    def change(bad):
        o = _occ(bad, lambda o: o["evidence_correlations"])
        ok = _occ(bad, lambda o: not o["zero_estimates"] and o["achieved_pct"])
        c = next(e["args"]["correlation"] for e in doc["traceEvents"] if e.get("name") == ok["name"])
        o["evidence_correlations"][0] = c  # a launch that read non-zero
    assert any("is no 0% launch" in p for p in _rejects(doc, r, change))


@pytest.mark.parametrize("field,value,said", [("dtype", "fp16", "dtype fp16"), ("arch", "sm80", "arch sm80"),
                                              ("tile", "64x64", "tile 64x64")])
def test_a_fingerprint_field_changed_is_rejected(field, value, said):
    doc, r = _owlv2()

    def change(bad):
        fp = next(fp for name, fp in bad["kernel_reading"]["fingerprints"].items() if "cutlass_75_tensorop_bf16" in name)
        fp[field] = value
    assert any(said in p for p in _rejects(doc, r, change))


def test_a_head_dim_changed_is_rejected():
    doc, r = _bert()

    def change(bad):
        fp = next(fp for fp in bad["kernel_reading"]["fingerprints"].values() if fp["head_dim"])
        fp["head_dim"] = "96"
    assert any("head_dim 96" in p for p in _rejects(doc, r, change))


def test_cpu_why_not_flash_flipped_is_rejected(cpu_traces):
    doc, r = _read(cpu_traces["math"])  # dropout: PyTorch refused the CPU flash kernel

    def change(bad):
        for lay in bad["layers"]:
            for b in (lay.get("why_not_flash") or {}).get("backends", []):
                if b["backend"] == "flash_cpu":
                    b["eligible"] = True
    assert any("CPU flash eligible but its op did not run" in p for p in _rejects(doc, r, change))

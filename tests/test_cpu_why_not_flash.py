"""Why not flash on a CPU trace uses the CPU's SDPA rules (issue 46, item 5): PyTorch's use_flash_attention_cpp
(aten/src/ATen/native/transformers/sdp_utils_cpp.cpp), never a GPU's. The truth each test compares against is
what PyTorch did, read from the raw events: whether aten::_scaled_dot_product_flash_attention_for_cpu ran."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from tb_attn_plugin.report.build import analyze_file
from tests.test_kernel_reading import _record, _sdpa
from tests.test_report_schema import SCHEMA, jsonschema

CPU_FLASH_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"


def _ran_cpu_flash(path: Path) -> bool:
    with open(path) as f:
        return any(e.get("name") == CPU_FLASH_OP for e in json.load(f)["traceEvents"])


def _why(path: Path):
    r = analyze_file(str(path))
    jsonschema.validate(msgspec.to_builtins(r), SCHEMA)
    (lay,) = r["layers"]
    return lay.why_not_flash


def test_dropout_on_float32_is_named_and_no_gpu_rule_is_applied(tmp_path):
    path = _record(tmp_path, "cpu_dropout", _sdpa((2, 4, 16, 64), (2, 4, 16, 64), dropout_p=0.1))
    assert not _ran_cpu_flash(path)  # PyTorch refused its CPU flash kernel and ran math
    w = _why(path)
    assert "sm80" not in w.device and "assumed" not in w.device and "CPU" in w.device
    assert [b.backend for b in w.backends] == ["flash_cpu"]  # the CPU has no efficient or cuDNN kernel
    (flash,) = w.backends
    assert flash.eligible is False
    assert [x.check for x in flash.refusals] == ["check_for_dropout"]
    assert "dropout" in flash.refusals[0].reason and "bfloat16" not in flash.refusals[0].fix
    assert flash.refusals[0].source.endswith("sdp_utils_cpp.h")


def test_a_call_that_ran_the_cpu_flash_kernel_is_not_refused(tmp_path):
    path = _record(tmp_path, "cpu_flash", _sdpa((2, 4, 16, 64), (2, 4, 16, 64)))
    assert _ran_cpu_flash(path)
    w = _why(path)
    (flash,) = w.backends
    assert flash.backend == "flash_cpu" and flash.eligible is not False and flash.refusals == []


def test_a_float32_mask_is_fine_on_the_cpu(tmp_path):
    """The CPU flash kernel takes a mask and float32 (GPU flash takes neither): no mask or dtype refusal."""
    path = _record(tmp_path, "cpu_mask", _sdpa((2, 4, 16, 64), (2, 4, 16, 64), dense_mask=True))
    assert _ran_cpu_flash(path)
    (flash,) = _why(path).backends
    assert flash.refusals == []


def test_the_text_report_says_cpu(tmp_path):
    from tb_attn_plugin.reading.text import why_not_flash_lines

    path = _record(tmp_path, "cpu_dropout_text", _sdpa((2, 4, 16, 64), (2, 4, 16, 64), dropout_p=0.1))
    text = "\n".join(why_not_flash_lines(_why(path)))
    assert "the CPU" in text and "check_for_dropout" in text and "sm80" not in text

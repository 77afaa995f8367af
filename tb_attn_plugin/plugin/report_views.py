"""The /kernels and /call answers: read from partial views of a cached report, never the whole of it."""

from __future__ import annotations

from typing import Any

import msgspec

from ..format.report.layers import Layer
from ..reading import call as call_reading


# msgspec skips every other field without building it, so /kernels and /call cost a fraction of
# decoding the whole report.
class KernelsView(msgspec.Struct):
    kernels: Any = None
    time_basis: Any = None


class CallsView(msgspec.Struct):
    call_samples: Any = None
    # what the Reading panel of a call looks up (reading/call.py)
    layers: list[Layer] | None = None
    reading: Any = None
    kernel_reading: Any = None
    time_basis: Any = None


def kernels(view: KernelsView, stage: str | None, pas: str | None, where: dict[str, Any]) -> dict[str, Any]:
    """The report's kernels of ``stage`` and ``pas`` (None: any)."""
    rows = [k for k in view.kernels or []
            if (stage is None or k.get("stage") == stage) and (pas is None or k.get("pass") == pas)]
    return {**where, "time_basis": view.time_basis, "kernels": rows}


def call(view: CallsView, call_id: int, run: str) -> dict[str, Any]:
    """The sample of call ``call_id`` with its Reading panel; LookupError (the 404's message) when the
    report holds no such sample."""
    for sample in view.call_samples or []:
        if sample.get("id") == call_id:
            doc = {"layers": view.layers, "reading": view.reading, "time_basis": view.time_basis}
            if view.kernel_reading is not None:
                doc["kernel_reading"] = view.kernel_reading
            return {**sample, "reading": call_reading.panel(doc, sample)}
    ids = [s.get("id") for s in view.call_samples or []]
    raise LookupError(f"run {run!r} has no call sample {call_id}"
                      + (f" (samples: {ids[0]}..{ids[-1]})" if ids else " (it has no attention calls)"))

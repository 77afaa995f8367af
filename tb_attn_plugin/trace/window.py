"""Kernel launches whose GPU work the trace never recorded: a window cut short, or activity lost.

The profiler stops when its ``with`` block ends; without a ``torch.cuda.synchronize()`` there, the
kernels still queued on the GPU are never written, while their launches (cuda_runtime/cuda_driver
events with a ``correlation`` id) are. Such a launch's time is "not recorded", not 0 µs. Launches in a
stream capture (``cudaStreamBeginCapture`` ... ``EndCapture``) build a graph and run nothing, so they
are left out, and so are memsets and memcpys (real traces hold memset calls without a GPU event).
Tables, one row per API with a real example and where it was seen.
"""

from __future__ import annotations

from bisect import bisect_right

import msgspec
import numpy as np

from ..format.linear_regex import compile_linear
from ..table.arrays import values_at

# APIs after which the GPU runs one activity of the same correlation id: (regex, example, source).
KERNEL_LAUNCH_APIS: tuple[tuple[str, str, str], ...] = (
    (r"cudaLaunchKernel(ExC)?(_v\d+)?", "cudaLaunchKernel",
     "trace: tl_h100_bert_small_sdpa_flash (34 cudaLaunchKernel, 4 cudaLaunchKernelExC, each with its kernel)"),
    (r"cuLaunchKernel(Ex)?", "cuLaunchKernel", "trace: tl_h100_bert_small_sdpa_flash (22, Triton and cuBLAS kernels)"),
    (r"cudaLaunchCooperativeKernel\w*|cuLaunchCooperativeKernel", "cudaLaunchCooperativeKernel",
     "source: CUDA runtime API (kineto's CUPTI runtime callbacks, libkineto/src/CuptiActivity.cpp)"),
    (r"hip(Ext)?(Module)?LaunchKernel|hipExtLaunchKernel\w*|hipLaunchCooperativeKernel\w*", "hipExtModuleLaunchKernel",
     "trace: tl_mi300x_bert_small_sdpa_aotriton (hipLaunchKernel 30, hipExtModuleLaunchKernel 26, hipModuleLaunchKernel 4)"),
    (r"(cuda|cu|hip)GraphLaunch", "hipGraphLaunch",
     "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (one hipGraphLaunch, every replayed kernel points at it)"),
)
# A stream capture's begin and end: launches between them on the same thread only build a graph.
CAPTURE_BEGIN = compile_linear(r"^(cuda|cu|hip)StreamBeginCapture\w*$")
CAPTURE_END = compile_linear(r"^(cuda|cu|hip)StreamEndCapture\w*$")
# Example: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph has 994 kernel launches, none with a kernel,
# all between one hipStreamBeginCapture and its hipStreamEndCapture.

_LAUNCH = compile_linear("|".join(f"(?:{rx})" for rx, _, _ in KERNEL_LAUNCH_APIS))


def is_kernel_launch(api_name: str) -> bool:
    return _LAUNCH.fullmatch(api_name) is not None


class Unrecorded(msgspec.Struct):
    """Kernel launches of the window whose GPU activity the trace lacks."""

    launches: list[int] = msgspec.field(default_factory=list)  # launches (positions in file order), by launch time
    ops: list[int] = msgspec.field(default_factory=list)  # each one's op (a position in Linked's columns), -1 when none
    tail: int = 0  # how many came after the last launch whose kernel was recorded: the window was cut
    first_ts: float = 0.0  # µs, trace clock: the first such launch
    gpu_end: float | None = None  # µs: the end of the last recorded GPU activity, None without any


class BeforeWindow(msgspec.Struct):
    """GPU activities launched before the window: kineto flushed them from before the profiler started
    (warm-up steps, an earlier window); no launch of the window made them."""

    kernels: np.ndarray  # bool per GPU activity (Linked.kernels' order): launched before the window
    count: int = 0  # 0 with ``unknown``: the trace cannot say
    gpu_us: float = 0.0
    first_ts: float = 0.0  # µs, trace clock: the earliest such activity's start
    window_start: float = 0.0  # µs: the window's first runtime/driver call
    unknown: str = ""  # why activity from before the window cannot be told apart, "" when it can


def before_window(ev, gt, by_corr: dict[int, int]) -> BeforeWindow | None:
    """The GPU activities (``gt``: their columns) launched before the window: their correlation id is
    carried by no launch of the trace (``by_corr``) and is older than every launch's (CUPTI and
    roctracer number launches in order). They ran before the window began, or while its first calls
    waited for them (a synchronize). None when there is none, or when activities of newer correlation
    ids lack their launch too (launches lost or skipped by the reader: then older ones may be lost the
    same way); ``unknown`` says why when the trace has no runtime call at all (GPU activity alone)."""
    lt = ev.launch_table
    if not len(gt):
        return None
    if not len(lt):
        return BeforeWindow(np.zeros(len(gt), bool), unknown=(
            "the trace has GPU activity but no runtime or driver call (recorded with activities=[ProfilerActivity.CUDA] "
            "only?): kernels that kineto flushed from before the profiling window cannot be told apart from the window's"))
    if not len(by_corr):
        return None
    has = gt.has("correlation")
    corr = gt["correlation"]
    try:
        known = np.fromiter(by_corr, np.int64, len(by_corr))
    except OverflowError:  # a launch's id past int64 (a bent trace) matches no activity's int64 column
        known = np.array([c for c in by_corr if -(1 << 63) <= c < 1 << 63], np.int64)
        if not len(known):
            return None
    unlaunched = has & ~np.isin(corr, known)
    if not unlaunched.any():
        return None
    oldest = known.min()
    if (unlaunched & (corr > oldest)).any():
        return None  # launches of the window are missing too: the trace cannot say which came before it
    early = unlaunched & (corr < oldest)
    n = int(early.sum())
    if not n:
        return None
    gpu_ts = gt["ts"].astype(np.float64, copy=False)
    return BeforeWindow(early, n, float(gt["dur"][early].sum()), float(gpu_ts[early].min()), float(lt["ts"].min()))


def unrecorded(ev, by_corr: dict[int, int], recorded: set, launch_op, gpu_end: float | None
               ) -> Unrecorded | None:
    """The kernel launches of ``ev`` (events.Events: its launches' columns) whose correlation id no
    GPU activity carries (``recorded``), outside stream captures; None when there is none.
    ``by_corr``: correlation -> launch position; ``launch_op``: each launch position's op."""
    missing = [by_corr[c] for c in by_corr.keys() - recorded]  # a set difference at C speed
    if not missing:
        return None
    names, lt = ev.launch_names, ev.launch_table
    # whether each launch is a kernel launch, each distinct name matched once
    kernel = np.array([is_kernel_launch(nm) for nm in names.values], bool)[names.ids]
    missing = np.array(missing, np.int64)
    missing = missing[kernel[missing]]
    if not len(missing):
        return None
    ts = lt["ts"]
    captured = _captures(ev)
    if captured:
        key = lambda j: (str(lt["pid"][j]), str(lt["tid"][j]))
        missing = missing[[not _in_capture(captured, key(j), ts[j]) for j in missing.tolist()]]
        if not len(missing):
            return None
    missing = missing[np.argsort(ts[missing], kind="stable")]  # by launch time
    ok = np.fromiter(by_corr.values(), np.int64, len(by_corr))
    ok = ok[kernel[ok] & ~np.isin(ok, missing)]
    last_ok = float(ts[ok].max()) if len(ok) else None
    out = Unrecorded(missing.tolist(), [launch_op[j] for j in missing.tolist()], first_ts=float(ts[missing[0]]),
                     gpu_end=gpu_end)
    out.tail = len(missing) if last_ok is None else int((ts[missing] > last_ok).sum())
    return out


def _captures(ev) -> dict[tuple, list[tuple[float, float]]]:
    """Per thread, the (begin, end) times of its stream captures, sorted."""
    names, lt = ev.launch_names, ev.launch_table
    ids = [i for i, nm in enumerate(names.values) if "Capture" in nm]
    if not ids:
        return {}
    begins: dict[tuple, list[float]] = {}
    out: dict[tuple, list[tuple[float, float]]] = {}
    at = np.flatnonzero(np.isin(names.ids, ids))
    for nm, pid, tid, ts, dur in zip(values_at(names.values, names.ids[at]), lt["pid"][at].tolist(),
                                     lt["tid"][at].tolist(), lt["ts"][at].tolist(), lt["dur"][at].tolist()):
        key = (str(pid), str(tid))
        if CAPTURE_BEGIN.match(nm):
            begins.setdefault(key, []).append(ts)
        elif CAPTURE_END.match(nm) and begins.get(key):
            out.setdefault(key, []).append((begins[key].pop(), ts + dur))
    for key, open_ in begins.items():  # a capture still open when the window ended
        out.setdefault(key, []).extend((t, float("inf")) for t in open_)
    for spans in out.values():
        spans.sort()
    return out


def _in_capture(captured: dict[tuple, list[tuple[float, float]]], key: tuple, ts: float) -> bool:
    spans = captured.get(key)
    if not spans:
        return False
    k = bisect_right(spans, (ts, float("inf"))) - 1
    return k >= 0 and spans[k][0] <= ts <= spans[k][1]

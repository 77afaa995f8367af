"""Occupancy's launch sums (reading/section.py) from columns equal the per-launch loop they
replaced: per (layer, kernel name), the launch configurations by GPU time in order of first launch,
CUPTI's estimate weighted by time, the launches read 0 and the first of those with a correlation id,
over launch args as a trace may hold them (ints, floats, bools, strings, lists, huge numbers)."""

from __future__ import annotations

from array import array
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.reading.section import _launches
from tb_attn_plugin.trace import launch_config
from tb_attn_plugin.trace.events import CATS, GPU_FIELDS, Args, Event
from tb_attn_plugin.trace.records import Table

_LIMIT = 1 << 31


def _count(v):
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < _LIMIT else None


def _loop(kernels, call_of, kernel_call, layers, rows):
    out = {}
    for i, (op, ev) in enumerate(kernels):
        c = call_of[op] if op >= 0 else -1
        if c < 0:
            c = kernel_call[i]
            if c < 0:
                continue
        if layers[c] not in rows or ev.cat not in ("kernel", "Kernel"):
            continue
        acc = out.setdefault((layers[c], ev.name), {"configs": {}, "us": 0.0, "sum": 0.0, "zero": 0, "measured": 0,
                                                     "corr": None})
        a = ev.args
        if a is None:
            continue
        regs, smem = _count(a.registers), _count(a.shared_memory)
        threads = None
        if isinstance(a.block, list) and 0 < len(a.block) <= 3:
            threads = 1
            for x in a.block:
                x = _count(x)
                if not x:
                    threads = None
                    break
                threads *= x
        if regs is not None and smem is not None and threads:
            acc["configs"][(regs, smem, threads)] = acc["configs"].get((regs, smem, threads), 0.0) + ev.dur
        occ = a.achieved_occupancy
        if isinstance(occ, (int, float)) and not isinstance(occ, bool) and 0 <= occ <= 100:
            acc["measured"] += 1
            if occ > 0:
                acc["us"] += ev.dur
                acc["sum"] += occ * ev.dur
            else:
                acc["zero"] += 1
                if acc["corr"] is None and isinstance(a.correlation, int):
                    acc["corr"] = a.correlation
    return out


_num = st.one_of(st.sampled_from([0, 1, 32, 64, 255, 1024, 49152, 2**31 - 1, 2**31, 2**70, -1]),
                 st.sampled_from([0.0, 32.0, 12.5, 99.9, 100.0, 100.5, -0.5, 1e300]),
                 st.booleans(), st.none(), st.just("32"))
_block = st.one_of(st.lists(st.sampled_from([1, 2, 128, 256, 1024, 2**30, 0, 1.0, True, "4"]), max_size=4), _num)
_args = st.one_of(st.none(), st.builds(lambda r, s, b, o, c: Args(registers=r, shared_memory=s, block=b,
                                                                   achieved_occupancy=o, correlation=c),
                                       _num, _num, _block, _num, st.one_of(st.none(), st.integers(0, 9))))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 3), st.sampled_from(["k1", "k2", ""]),
                          st.sampled_from(["kernel", "gpu_memcpy"]), st.sampled_from([0.5, 1.25, 3.0, 1e-3]), _args,
                          st.integers(-1, 2)), max_size=40))
def test_launch_sums_from_columns_are_the_loops(launches):
    call_of, layers, rows = [0, 1, -1, 2], ["a", "b", "c"], {"a": {}, "c": {}}
    kernels = [(op, Event(ph="X", cat=cat, name=nm, dur=d, args=a)) for op, nm, cat, d, a, _ in launches]
    L = SimpleNamespace(kernel_op=array("q", [op for op, _ in kernels]),
                        kernels=[SimpleNamespace(op=op, name=ev.name, cat=ev.cat, dur=ev.dur) for op, ev in kernels],
                        kernel_dur=array("d", [ev.dur for _, ev in kernels]),
                        kernel_config=launch_config.of([ev.args for _, ev in kernels]),
                        kernel_table=Table.of([ev for _, ev in kernels], GPU_FIELDS, CATS))  # correlation ids
    m = SimpleNamespace(kernel_call=[kc for *_, kc in launches])
    calls = [SimpleNamespace(layer=lay) for lay in layers]
    got = {k: {"configs": list(v.configs.items()), "us": v.achieved_us, "sum": v.achieved_sum, "zero": v.zero,
               "measured": v.measured, "corr": v.zero_corr}
           for k, v in _launches(L, calls, call_of, m, rows).items()}
    want = {k: {**v, "configs": list(v["configs"].items())}
            for k, v in _loop(kernels, call_of, m.kernel_call, layers, rows).items()}
    assert repr(got) == repr(want)  # the same groups and configurations in the same order, sums to the bit

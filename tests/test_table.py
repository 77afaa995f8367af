"""trace/records.py (and table/arrays.py): the columns the scanner's records give, gathered chunk by chunk while a trace is
decoded, are those read from the decoded events (Table.of), and link gives the same result from
either; runs_of numbers threads as a dict over the rows does."""

from __future__ import annotations

import gzip

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.attention.patterns import needs_shapes
from tb_attn_plugin.trace import events, link, native, rules, stream
from tb_attn_plugin.trace.events import CATS, GPU_FIELDS, LAUNCH_FIELDS, MEMORY_FIELDS, OP_FIELDS, Args, Event
from tb_attn_plugin.table.arrays import runs_of
from tb_attn_plugin.trace.records import INT_ARGS, REC, Table
from tests.conftest import shared_trace


def _streamed(monkeypatch, path, window):
    monkeypatch.setattr(rules, "CHUNK_BYTES", window)
    monkeypatch.setattr(stream, "READ_BYTES", window)  # pieces this small: many chunks per trace
    got = stream.decode_file(str(path), needs_shapes)
    if got is None:
        pytest.skip("the C scanner is not built")  # scripts/test.sh sets TB_ATTN_REQUIRE_NATIVE: then it is
    return got[0]


def test_the_record_is_the_scanners():
    # _scanner.c's Rec: times, thread, category, Args' int members in Args' order, nulls
    ints = [f.name for f in msgspec.structs.fields(Args) if f.type == (int | None)]
    assert list(INT_ARGS) == ints
    if native.available:
        assert REC.itemsize == native.REC_SIZE


@pytest.mark.parametrize("window", [4096, 65536])
def test_gathered_columns_are_the_events_columns(monkeypatch, cpu_traces, window):
    adds, add, shaped = [0], Table.add_records, 0
    monkeypatch.setattr(Table, "add_records", lambda self, r: (adds.__setitem__(-1, adds[-1] + bool(r)), add(self, r)))
    for path in cpu_traces.values():
        adds.append(0)
        ev = _streamed(monkeypatch, path, window)
        # the records (routed ops and launches keep no int args as objects) against the columns the
        # Python decoder reads from its events, the [memory] instants included
        monkeypatch.setattr(native, "available", False)
        plain = events.decode(str(path), path.read_bytes())
        monkeypatch.setattr(native, "available", True)
        shaped += _same_columns(ev, plain)
        assert len(plain.memory) > 0
    assert max(adds) > 3 and shaped  # gathered over many chunks, not one; some ops kept their shapes


@pytest.mark.parametrize("name", ["tl_h100_owlv2_eager_bmm_softmax", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph",
                                  "hta_a100_negative_log_softmax_fwdbwd"])
def test_gpu_traces_records_are_the_events_columns(monkeypatch, name):
    # Kernels with CUPTI's launch args, HIP graphs, backward flows: every kept event's record, in
    # many chunks, reads as the columns of its decoded event, and the [memory] records as the
    # columns the Python decoder reads.
    path = shared_trace(name)
    ev = _streamed(monkeypatch, path, 1 << 20)
    monkeypatch.setattr(native, "available", False)
    plain = events.decode(str(path), gzip.decompress(path.read_bytes()))
    _same_columns(ev, plain)
    assert len(ev.op_table) and len(ev.launch_table) and len(ev.gpu_table)


def _gpu_of(ev):
    """The GPU activities' names and launch configurations, as the analysis reads them."""
    return [ev.gpu_names.values[i] for i in ev.gpu_names.ids.tolist()], repr([c.tolist() for c in ev.gpu_config])


def _op_names(ev):
    return [ev.op_names.values[i] for i in ev.op_names.ids.tolist()]


def _same_columns(ev, plain):
    """The streamed decode's records read as the columns of the Python decoder's events."""
    # GPU activities are columns either way too: the records', their names and launch configurations
    assert len(ev.gpu_table) == len(plain.gpu_table) == len(ev.gpu_names.ids) == len(ev.gpu_config)
    for f in GPU_FIELDS:
        assert ev.gpu_table[f].tolist() == plain.gpu_table[f].tolist(), ("gpu", f)
    assert _gpu_of(ev) == _gpu_of(plain)
    # launches are columns either way: the records' against those read off the Python decoder's events,
    # and their names from the scanner's array against the decoded names
    assert len(ev.launch_table) == len(plain.launch_table) == len(ev.launch_names.ids)
    for f in LAUNCH_FIELDS:
        assert ev.launch_table[f].tolist() == plain.launch_table[f].tolist(), ("launches", f)
    assert list(map(ev.launch_name, range(len(ev.launch_table)))) == \
        list(map(plain.launch_name, range(len(plain.launch_table))))
    # ops are columns either way: the records' against those the Python decoder read off its events,
    # the names from the scanner's array against the decoded names, and the shapes kept (the plain
    # decode keeps every op's, the streamed one those of the names needs_shapes wants)
    names = _op_names(ev)
    assert len(ev.op_table) == len(plain.op_table) == len(names) > 0
    for f in OP_FIELDS:
        assert ev.op_table[f].tolist() == plain.op_table[f].tolist(), ("ops", f)
    assert names == _op_names(plain)
    raw = lambda kept: tuple(bytes(getattr(events.op_args(kept), f)) for f in ("dims_raw", "types_raw", "concrete_raw",
                                                                                "strides_raw"))
    wanted = {i: raw(a) for i, a in plain.op_shapes.items() if needs_shapes(names[i])}
    assert {i: raw(a) for i, a in ev.op_shapes.items()} == wanted
    assert isinstance(plain.memory, Table) and len(plain.memory) == len(ev.memory)
    for f in MEMORY_FIELDS:
        assert ev.memory[f].tolist() == plain.memory[f].tolist(), f
    return len(wanted)


def _linked_lists(L):
    cols = ("parent", "depth", "subtree_end", "self_cpu", "gpu_self", "launches_self", "step", "node_of", "ts", "dur",
            "thread")
    return (list(zip(L.names, L.ts)), {c: list(getattr(L, c)) for c in cols}, L.fwd_of, L.threads,
            [(k.name, k.cat, k.pid, k.tid, k.ts, k.dur, k.op, k.graph) for k in L.kernels], L.steps, L.unlinked_kernels,
            bytes(L.cpu),
            list(L.cats), bytes(L.has_args))


def test_link_of_the_records_is_the_link_of_the_python_decoders_events(monkeypatch, cpu_traces):
    saw_backward = False
    for path in cpu_traces.values():
        ev = _streamed(monkeypatch, path, 8192)
        with_cols = link.link(ev)
        saw_backward |= bool(with_cols.fwd_of)
        assert with_cols.cpu == bytes(CATS[c] == "cpu_op" for c in with_cols.cats)
        monkeypatch.setattr(native, "available", False)
        plain = events.decode(str(path), path.read_bytes())
        monkeypatch.setattr(native, "available", True)
        # the Python decoder's events, linked from the columns it read off them (full Args: ints included)
        assert _linked_lists(link.link(plain)) == _linked_lists(with_cols)
    assert saw_backward  # the sequence numbers were read from the records for real


def _ev(ts, dur=1.0, pid=1, tid=1, **args):
    return Event(ph="X", cat="cpu_op", name="a", pid=pid, tid=tid, ts=ts, dur=dur, args=Args(**args) if args else None)


def test_columns_join_across_chunks_and_read_args_by_position():
    t = Table(OP_FIELDS, CATS)  # seq among them
    t.add_events([_ev(0.0, seq=4), _ev(1.0, pid=2, tid=9)])
    t.add_events([_ev(2, pid=2, tid=9), _ev(3.0), _ev(4.0, seq=0)])  # an int time, as Python may build one
    t.finish()
    assert t["ts"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and t["ts"].dtype == np.float64
    assert np.flatnonzero(t.has("seq")).tolist() == [0, 4] and t["seq"][t.has("seq")].tolist() == [4, 0]
    assert t["pid"].tolist() == [1, 2, 2, 1, 1]


def test_ids_past_int64_and_string_threads_stay_python_objects():
    t = Table.of([_ev(0.0, pid="gpu", correlation=2**64 - 1), _ev(1.0, correlation=3)], LAUNCH_FIELDS, CATS)
    assert t["pid"].tolist() == ["gpu", 1] and t["correlation"].tolist() == [2**64 - 1, 3]


_ids = st.sampled_from([1, 2, 7, "1", "gpu"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_ids, _ids), max_size=30))
def test_runs_of_numbers_threads_in_order_of_first_appearance(rows):
    want: dict = {}
    ids = [want.setdefault(r, len(want)) for r in rows]
    col = lambda k: np.array([r[k] for r in rows] + [None], object)[:-1]  # noqa: E731
    got = runs_of(col(0), col(1))
    assert got.ids.tolist() == ids and got.values == list(want)
    if all(type(a) is int and type(b) is int for a, b in rows):  # int64 columns, as the records give them
        got = runs_of(np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64))
        assert got.ids.tolist() == ids and got.values == list(want)

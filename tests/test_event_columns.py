"""trace/event_columns.py: the ops' and launches' columns gathered chunk by chunk while decoding
are the ones link would read from the events, and link gives the same result with or without them."""

from __future__ import annotations

from array import array

import msgspec
import pytest

from tb_attn_plugin.attention.patterns import needs_shapes
from tb_attn_plugin.trace import event_columns, events, link, stream
from tb_attn_plugin.trace.events import Args, Event

needs_kept = pytest.mark.skipif(event_columns._c_kept is None, reason="the C helpers (_kept.c) are not built")


def _streamed(monkeypatch, path, window):
    monkeypatch.setattr(events, "CHUNK_BYTES", window)
    monkeypatch.setattr(stream, "READ_BYTES", window)  # pieces this small: many chunks per trace
    got = stream.decode_file(str(path), needs_shapes)
    if got is None:
        pytest.skip("the C scanner is not built")  # scripts/test.sh sets TB_ATTN_REQUIRE_NATIVE: then it is
    return got[0]


@needs_kept
@pytest.mark.parametrize("window", [4096, 65536])
def test_gathered_columns_are_the_events_columns(monkeypatch, cpu_traces, window):
    adds, add = [0], event_columns.EventColumns.add

    def counted(self, evs):
        adds[-1] += bool(evs) and self.attr == "seq"
        add(self, evs)

    monkeypatch.setattr(event_columns.EventColumns, "add", counted)
    for path in cpu_traces.values():
        adds.append(0)
        ev = _streamed(monkeypatch, path, window)
        for gathered, evs, attr in ((ev.op_columns, ev.ops, "seq"), (ev.launch_columns, ev.launches, "correlation")):
            assert gathered is not None and gathered.of(evs) is gathered and gathered.attr == attr
            th, keys, ts, dur = event_columns._c_kept.columns(evs)
            assert gathered.keys == keys
            assert gathered.thread == array("q", th) and gathered.ts == array("d", ts) and gathered.dur == array("d", dur)
            assert (gathered.arg_at, gathered.arg_values) == tuple(link._arg_values(evs, attr))
            if gathered.cat is not None:
                assert gathered.is_cat == bytes(e.cat == gathered.cat for e in evs)
    assert max(adds) > 3  # gathered over many chunks, not one


def _linked_lists(L):
    cols = ("parent", "depth", "subtree_end", "self_cpu", "gpu_self", "launches_self", "step", "node_of", "ts", "dur",
            "thread")
    return ([id(e) for e in L.ops], {c: list(getattr(L, c)) for c in cols}, L.fwd_of, L.threads,
            [(id(k.ev), k.op, k.graph) for k in L.kernels], L.steps, L.unlinked_kernels, bytes(L.cpu), L.names)


@needs_kept
def test_link_is_the_same_with_or_without_the_gathered_columns(monkeypatch, cpu_traces):
    saw_backward = False
    for path in cpu_traces.values():
        ev = _streamed(monkeypatch, path, 8192)
        with_cols = link.link(ev)
        saw_backward |= bool(with_cols.fwd_of)
        assert with_cols._cpu is not None  # the cpu-op column came permuted from the C pass
        assert with_cols.cpu == bytes(e.cat == "cpu_op" for e in with_cols.ops)
        assert with_cols.names == [e.name for e in with_cols.ops]
        bare = msgspec.structs.replace(ev, op_columns=None, launch_columns=None)
        assert _linked_lists(link.link(bare)) == _linked_lists(with_cols)
    assert saw_backward  # the sequence numbers were read from the columns for real


def _ev(ts, dur=1.0, **args):
    return Event(ph="X", cat="cpu_op", name="a", pid=1, tid=1, ts=ts, dur=dur, args=Args(**args) if args else None)


@needs_kept
def test_columns_number_threads_on_across_chunks_and_args_by_position():
    cols = event_columns.EventColumns("seq")
    first = [_ev(0.0, seq=4), Event(ph="X", cat="cpu_op", name="b", pid=2, tid=9, ts=1.0, dur=1.0)]
    second = [Event(ph="X", cat="cpu_op", name="c", pid=2, tid=9, ts=2.0, dur=1.0), _ev(3.0), _ev(4.0, seq=0)]
    cols.add(first)
    cols.add(second)
    assert cols.keys == [(1, 1), (2, 9)] and list(cols.thread) == [0, 1, 1, 0, 0]
    assert list(cols.ts) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert (cols.arg_at, cols.arg_values) == ([0, 4], [4, 0])
    assert cols.of(first + second) is cols and cols.of(first) is None  # not the columns of another list


@needs_kept
def test_a_time_that_is_not_a_float_drops_the_columns():
    cols = event_columns.EventColumns("seq")
    cols.add([_ev(0.0)])
    cols.add([_ev(1)])  # an int time, as an Event built in Python may have: link's loops decide then
    cols.add([_ev(2.0)])
    assert not cols.ok and cols.of([_ev(0.0), _ev(1), _ev(2.0)]) is None and len(cols.ts) == 0


@needs_kept
def test_c_columns_refuse_an_index_without_its_keys():
    with pytest.raises(ValueError):
        event_columns._c_kept.columns([_ev(0.0)], {(1, 1): 0}, [])
    with pytest.raises(TypeError):
        event_columns._c_kept.columns([_ev(0.0)], [], {})

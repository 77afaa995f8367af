"""trace/pipeline.py: work on two threads at once, and the op tree built beside the memory timelines."""

from __future__ import annotations

import threading

import pytest

from tb_attn_plugin.memory import engine
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace import events, link
from tb_attn_plugin.trace.pipeline import together
from tb_attn_plugin.trace.read import read_trace_text


def test_together_runs_beside_on_another_thread_and_returns_both_results():
    here_thread = threading.get_ident()
    seen = {}

    def beside():
        seen["beside"] = threading.get_ident()
        return "b"

    def here():
        seen["here"] = threading.get_ident()
        return "h"

    assert together(beside, here) == ("b", "h")
    assert seen["here"] == here_thread and seen["beside"] != here_thread


def test_together_raises_either_side_error_after_both_finished():
    done = threading.Event()

    def slow_beside():
        done.wait(5)
        return 1

    def failing_here():
        done.set()
        raise KeyError("here")

    with pytest.raises(KeyError, match="here"):
        together(slow_beside, failing_here)
    assert not [t for t in threading.enumerate() if t.name == "tb-attn-beside"]

    def failing_beside():
        raise ValueError("beside")

    with pytest.raises(ValueError, match="beside"):
        together(failing_beside, lambda: 2)


def _plain(value):
    """Columns (numpy, array), tuples and dicts as plain lists and dicts, to compare with ==."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.tolist() if hasattr(value, "tolist") else value


def test_op_tree_built_beside_the_timelines_equals_the_tree_built_alone(cpu_traces):
    # the tree's pass (nest_sorted) releases the GIL while the caller's thread makes the memory timelines: the tree and
    # the section must be what they are one after the other.
    for path in cpu_traces.values():
        text, warnings = read_trace_text(path)
        ev = events.decode(path, text, warnings)
        alone = link.op_tree(ev)
        tree, tls = together(lambda: link.op_tree(ev), lambda: engine.Timelines(ev))
        assert _plain(tree) == _plain(alone)
        assert set(tls.get()) == set(engine.Timelines(ev).get())


def test_reports_are_the_same_with_and_without_the_overlap(cpu_traces, monkeypatch):
    path = next(iter(cpu_traces.values()))
    overlapped = analyze_file(path)
    import tb_attn_plugin.report.build as build

    monkeypatch.setattr(build, "together", lambda beside, here: (beside(), here()))
    sequential = analyze_file(path)
    for r in (overlapped, sequential):
        r.pop("analysis_seconds")
    assert overlapped == sequential

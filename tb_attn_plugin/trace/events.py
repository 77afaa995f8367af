"""Typed decoding of kineto (Chrome trace format) JSON into compact records.

Only the fields the analysis reads are declared; msgspec skips everything else while parsing, so
no dict is ever built per event. Event kinds the analysis never uses (Python stack frames other than
``nn.Module`` scopes, flow events other than fwd→bwd, metadata rows) are dropped before decoding by
the C scanner when it is built (native.py), else right after decoding; the same rules hold either way.
The scanner also sorts the kept events into their lists before msgspec sees them, checks their
times, and writes a fixed-width record of each (times, thread, category, Args' ints), which
table.Table turns into the columns link reads; a ``[memory]`` instant is only its record: no Python
object per allocation event. Ops, launches and GPU activities are columns only. The names of ops
and launches come from arrays the scanner writes beside their JSON (table.Names makes them ids), and
their JSON only where it holds shapes or text outside the subset the scanner checks itself: msgspec
checks it, and reads an op's shapes where keep_shapes wants them. Of a GPU activity's JSON only its
name and launch configuration are read (launch_config.py makes the latter columns). Streamed, the
scanner slims the kept events too (_Kept.slim): their args keep only the members Args declares, and
ops keep no shapes once keep_shapes has said no to their name.

Paths, fastest first: the scanner's (_decode_native); chunks of the array decoded in Python
(_decode_chunked); the whole document at once; event by event, skipping mistyped ones; and for a
file cut short, the complete events before the cut (_salvage_truncated).
"""

from __future__ import annotations

from typing import Any, Callable, Literal, NamedTuple, Union

import msgspec
import numpy as np

from ..format.errors import TraceError
from . import launch_config, native, rules
from .launch_config import LaunchColumns
from .rules import CATS, CPU_CATS, MAX_DUR, MAX_TS, MEMORY_NAME, MODULE_PREFIX, Args, Shapes
from .rules import PYTHON_CAT as PYTHON_CAT  # re-exported: link and the scanner's tests read it here
from .rules import EVENTS_KEY as _EVENTS_KEY
from .rules import NAMES_DECODER as _names_decoder
from .rules import RAW_NULL as _NULL
from .rules import PREFILTER_RULES as _PREFILTER_RULES
from .rules import ROUTE as _ROUTE
from .rules import TARGET as _TARGET
from ..table.arrays import Names
from .records import JSON, REC, SHAPES, Table

Id = Union[int, str]


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Id = 0
    tid: Id = 0
    ts: float = 0.0
    dur: float = 0.0
    id: Id | None = None
    args: Args | None = None


class _Doc(msgspec.Struct, gc=False):
    traceEvents: list[Event] | None = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    tb_attn: Any = None  # run metadata written by the collector (tb_attn_plugin.format.tags)


class _RawDoc(msgspec.Struct, gc=False):
    traceEvents: list[msgspec.Raw] | None = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    tb_attn: Any = None


# The columns each list keeps (table.REC's names): the op tree's, the joins' and the memory timelines'.
OP_FIELDS = ("ts", "dur", "pid", "tid", "cat", "external_id", "seq", "nulls")
LAUNCH_FIELDS = ("ts", "dur", "pid", "tid", "correlation", "nulls")
GPU_FIELDS = ("ts", "dur", "pid", "tid", "cat", "correlation", "external_id", "stream", "nulls")
MEMORY_FIELDS = ("ts", "pid", "tid", "device_type", "device_id", "addr", "nbytes", "total_allocated",
                 "total_reserved", "nulls")
CONFIGS_AT_ONCE = 1 << 14  # GPU activities whose launch configurations become columns in one go (_add_configs)


class _Routed(Event, gc=False):
    """An event of a list the scanner routed: its ph and category are then known values, decoded
    as one shared string each instead of a new one per event."""

    ph: Literal["X", "s", "f"] = "X"
    cat: Literal[CATS] = "cpu_op"  # type: ignore[valid-type]


class LaunchConfig(msgspec.Struct, gc=False):
    """What a routed GPU activity's args add to its record: a kernel's launch as CUPTI writes it
    (Args' members of the same names; launch_config.py reads them into columns, checking their types)."""

    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    block: Any = None
    achieved_occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    grid: Any = None


class _RoutedGpu(msgspec.Struct, gc=False):
    """What a routed kernel's, memcpy's or memset's JSON adds to its record: its name and its launch
    configuration (the scanner checked the rest: times, thread, ph, category, id)."""

    name: str = ""
    args: LaunchConfig | None = None


class _OpArgs(msgspec.Struct, gc=False):
    """What a routed op's JSON adds to its record and name: its shapes (decoded for the few ops whose
    name keep_shapes wants)."""

    args: Shapes | None = None


class Events(msgspec.Struct, gc=False):
    """The kept events of one trace, split by kind (each list in file order). Ops (cpu ops, user
    annotations, nn.Module scopes: the op tree's nodes), launches (runtime and driver calls) and GPU
    activities (kernels, memcpy, memset) are columns only: no event object per op, launch or kernel."""

    op_table: Table | None  # the ops' record columns (OP_FIELDS); None once link has read them
    op_names: Names  # each op's name, as an id into the distinct names
    # op (index in file order) -> its shapes, for the ops keep_shapes wants: decoded, or the op's JSON (op_args)
    op_shapes: dict[int, Shapes | msgspec.Raw]
    launch_table: Table  # the launches' record columns (LAUNCH_FIELDS)
    launch_names: Names  # each launch's name (cudaLaunchKernel, cuLaunchKernel, hipGraphLaunch...), as an id
    gpu_table: Table | None  # the GPU activities' record columns (GPU_FIELDS); None once link has read them
    gpu_names: Names  # each one's name (the kernel's), as an id
    gpu_config: LaunchColumns  # each one's launch configuration (a kernel's registers, block, ...)
    flows: list[Event]  # fwdbwd flow starts and ends
    memory: Table | list[Event]  # [memory] instants: their columns (table.Table), or Events built in Python
    device_properties: list[dict[str, Any]]
    distributed: dict[str, Any]
    tb_attn: Any
    total_events: int
    warnings: list[str]
    truncated: bool = False  # the JSON ended early: only the events before the cut were analysed

    def launch_name(self, j: int) -> str:
        """Launch j's name (its position in file order)."""
        return self.launch_names.values[self.launch_names.ids[j]]

    def op_events(self) -> list[Event]:
        """The ops as Event objects made from their columns, in file order: for tests and tools (the
        engine reads the columns)."""
        t, values = self.op_table, self.op_names.values
        shapes = self.op_shapes
        return [Event(ph="X", cat=CATS[c], name=values[nm], pid=pid, tid=tid, ts=ts, dur=dur,
                      args=op_args(shapes[i]) if i in shapes else None)
                for i, (c, nm, pid, tid, ts, dur) in enumerate(zip(t["cat"].tolist(), self.op_names.ids.tolist(),
                                                                   t["pid"].tolist(), t["tid"].tolist(),
                                                                   t["ts"].tolist(), t["dur"].tolist()))]


_doc_decoder = msgspec.json.Decoder(_Doc)
_list_decoder = msgspec.json.Decoder(list[Event])
_routed_decoder = msgspec.json.Decoder(list[_Routed])
_gpu_decoder = msgspec.json.Decoder(list[_RoutedGpu])
# A routed op's or launch's JSON, where the scanner wrote it (its shapes, or syntax the scanner leaves to
# msgspec), is checked as a whole but read only for an op's shapes: its name comes from the scanner's array
# of names, the rest from its record.
_checked_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_op_args_decoder = msgspec.json.Decoder(_OpArgs)
_event_decoder = msgspec.json.Decoder(Event)


def op_args(kept: Shapes | msgspec.Raw) -> Shapes:
    """An op's kept shapes (Events.op_shapes), decoded now where the op's JSON was kept instead: most
    kept shapes are never read, and a copy of the JSON costs less than decoding it."""
    return kept if isinstance(kept, Shapes) else _op_args_decoder.decode(kept).args or Shapes()


def decode(path: str, text: bytes, warnings: list[str] | None = None,
           keep_shapes: Callable[[str], bool] | None = None) -> Events:
    """Decode trace JSON ``text`` (read from ``path``, used in messages) into Events.

    ``keep_shapes(op_name)`` says which ops' Input Dims/types/Concrete Inputs the caller will
    read; the others are dropped while decoding (None keeps all)."""
    warnings = list(warnings or [])
    head = text.lstrip()[:1]
    if head not in (b"{", b"["):
        raise TraceError(path, _not_a_document(text))
    try:
        return _decode(path, text, head, warnings, keep_shapes)
    except RecursionError:
        raise TraceError(path, "corrupt JSON: values nested too deeply") from None


def _not_a_document(text: bytes) -> str:
    """Why text that does not start like a trace is refused: valid JSON of the wrong kind, or not JSON."""
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return "not JSON: a trace starts with '{' or '['"
    kind = "null" if value is None else {bool: "a boolean", str: "a string"}.get(type(value), "a number")
    return f"JSON but not a trace: the document is {kind}, not an object with a 'traceEvents' list"


def _decode(path: str, text: bytes, head: bytes, warnings: list[str], keep_shapes) -> Events:
    fast = None
    if native.available:
        try:
            fast = _decode_native(text, head, keep_shapes)
        except msgspec.DecodeError:
            fast = None  # a mistyped event or a damaged file: the paths below judge it
    if fast is None:
        try:
            fast = _decode_chunked(text, head, keep_shapes)
        except msgspec.DecodeError:
            fast = None  # a mistyped event, a false chunk boundary or a damaged file: take the careful path
    if fast is not None:
        return fast.result(warnings)
    truncated = False
    try:
        doc = _decode_typed(text, head)
    except msgspec.ValidationError as exc:
        # Valid JSON with some mistyped events (or JSON that is not a trace at all).
        try:
            doc = _decode_leniently(path, text, head, str(exc), warnings)
        except msgspec.DecodeError as exc2:
            doc, truncated = _salvage_truncated(path, text, head, str(exc2), warnings), True
    except msgspec.DecodeError as exc:
        doc, truncated = _salvage_truncated(path, text, head, str(exc), warnings), True
    if doc.traceEvents is None:
        raise TraceError(path, "JSON but not a trace: no 'traceEvents' list")
    kept = _Kept(doc)
    kept.add(doc.traceEvents)
    return kept.result(warnings, truncated)


def _decode_typed(text: bytes, head: bytes) -> _Doc:
    if head == b"[":
        return _Doc(traceEvents=_list_decoder.decode(text))
    return _doc_decoder.decode(text)


def _decode_leniently(path: str, text: bytes, head: bytes, why: str, warnings: list[str]) -> _Doc:
    """Some events have mistyped fields: decode event by event and skip the bad ones."""
    try:
        if head == b"[":
            raw = _RawDoc(traceEvents=msgspec.json.decode(text, type=list[msgspec.Raw]))
        else:
            raw = msgspec.json.decode(text, type=_RawDoc)
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"JSON but not a trace: {exc}") from None
    if raw.traceEvents is None:
        raise TraceError(path, "JSON but not a trace: no 'traceEvents' list")
    kept, bad, first = [], 0, why
    for r in raw.traceEvents:
        try:
            kept.append(_event_decoder.decode(r))
        except msgspec.ValidationError as exc:
            bad += 1
            first = first or str(exc)
    if raw.traceEvents and not kept:
        raise TraceError(path, f"JSON but not a trace: no event has the trace event fields ({why})")
    if bad:
        warnings.append(f"skipped {bad} of {len(raw.traceEvents)} events with missing or mistyped fields ({why})")

    def typed(v, t):
        try:
            return msgspec.convert(v, t)
        except msgspec.ValidationError:
            return None

    return _Doc(
        traceEvents=kept,
        deviceProperties=typed(raw.deviceProperties, list[dict[str, Any]]),
        distributedInfo=typed(raw.distributedInfo, dict[str, Any]),
        tb_attn=raw.tb_attn,
    )


def _salvage_truncated(path: str, text: bytes, head: bytes, why: str, warnings: list[str]) -> _Doc:
    """The JSON is cut short or corrupt. Kineto writes one event per line, so a file cut while
    being written still parses once closed after its last complete event."""
    start = text.find(b"[", 0 if head == b"[" else max(text.find(b'"traceEvents"'), 0))
    if start < 0 or (head == b"{" and text.find(b'"traceEvents"') < 0):
        raise TraceError(path, f"corrupt JSON: {why}")
    end = len(text)
    for _ in range(64):
        end = text.rfind(b"}", start, end)
        if end < 0:
            break
        body = text[start : end + 1] + b"]"
        try:
            events = _list_decoder.decode(body)
        except msgspec.ValidationError as exc:
            try:
                events = _decode_leniently(path, body, b"[", str(exc), warnings).traceEvents
            except (msgspec.DecodeError, TraceError):
                continue
        except msgspec.DecodeError:
            continue
        if head == b"{":
            # Keep the fields before traceEvents (kineto writes deviceProperties first).
            prefix = text[:start].rstrip()
            try:
                doc = _doc_decoder.decode(prefix + b"[]}")
            except msgspec.DecodeError:
                doc = _Doc()
            doc.traceEvents = events
        else:
            doc = _Doc(traceEvents=events)
        warnings.append(
            f"file ends early or is corrupt after event {len(events)} ({why}); "
            "analysed the complete events before that point (is the trace still being written?)"
        )
        return doc
    raise TraceError(path, f"corrupt or truncated JSON: {why}")


class _Head(msgspec.Struct, gc=False):
    traceEvents: msgspec.Raw = _NULL
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    tb_attn: Any = None


_head_decoder = msgspec.json.Decoder(_Head)


class _Kept:
    """Accumulates the events the analysis uses, chunk by chunk, and drops the rest at once."""

    def __init__(self, doc, keep_shapes: Callable[[str], bool] | None = None, shapes: rules.ShapesWanted | None = None):
        self.doc = doc
        # which ops keep their shapes: learned here, or taken over from a reading begun early (stream.start)
        self.shapes = shapes if shapes is not None else rules.ShapesWanted(keep_shapes)
        self.op_names, self.op_shapes, self.launch_names = Names(), {}, Names()
        self._wanted_ids = np.zeros(0, np.int8)  # _wanted
        self.gpu_names, self._gpu_config, self._configs = Names(), [], []  # _configs: not yet columns
        self.flows: list[Event] = []
        self.op_table, self.launch_table = Table(OP_FIELDS, CATS), Table(LAUNCH_FIELDS, CATS)
        self.gpu_table, self.memory = Table(GPU_FIELDS, CATS), Table(MEMORY_FIELDS, CATS)
        self.total = 0
        self.insane = 0
        # One object per distinct string and id: a trace repeats the same few categories, kernel
        # and op names, pids and tids in every step, and as separate objects they were about a
        # third of the kept events' memory.
        self._shared: dict[Any, Any] = {}

    def slim(self) -> tuple:
        """The scanner's slim rules (see _scanner.scan_events): what is left out of the chunks
        scanned from now on is what add_scanned would drop from them anyway."""
        return self.shapes.slim()

    def add(self, events: list[Event], dropped: int = 0) -> None:
        """Keep what the analysis uses of ``events``; ``dropped`` more were left out before decoding
        (by the same rules, see _PREFILTER_RULES)."""
        # One pass sends each event to the list it may join (file order kept within each list,
        # whatever the chunking), then a small filter per list: the per-event work is one lookup.
        self.total += len(events) + dropped
        groups: dict[str, list[Event]] = {"ops": [], "gpu": [], "launches": [], "flows": [], "other": []}
        target = _TARGET
        for e in events:
            groups[target.get(e.cat, "other")].append(e)
        ops = self._sane([e for e in groups["ops"]
                          if e.ph == "X" and (e.cat in CPU_CATS or e.name.startswith(MODULE_PREFIX))])
        gpu = self._sane([e for e in groups["gpu"] if e.ph == "X"])
        launches = self._sane([e for e in groups["launches"] if e.ph == "X"])
        self.flows += self._sane([e for e in groups["flows"] if e.ph == "s" or e.ph == "f"])
        base = len(self.op_table)
        self.op_table.add_events(ops)
        self.op_names.add([e.name for e in ops])
        for k, e in enumerate(ops):
            if e.args is not None and _holds_shapes(e.args):
                self._add_shapes(base + k, e.name, e.args)
        self.gpu_table.add_events(gpu)
        self.gpu_names.add([e.name for e in gpu])
        self._add_configs([e.args for e in gpu])
        self.launch_table.add_events(launches)
        self.launch_names.add([e.name for e in launches])
        self.memory.add_events(self._sane([e for e in groups["other"]
                                           if (e.ph == "i" or e.ph == "I") and e.name == MEMORY_NAME]))

    def add_scanned(self, kept: bytes | tuple, dropped: int) -> None:
        """One chunk from the C scanner: its kept events as one JSON array, or (scanned with
        _ROUTE) already sorted into their lists and checked, with their records."""
        if isinstance(kept, bytes):
            self.add(_list_decoder.decode(kept), dropped)
            return
        ops_j, gpu_j, launch_j, flow_j, rest_j, mem_recs, op_recs, gpu_recs, launch_recs, insane, names_j, \
            launch_names_j = kept
        dec = _routed_decoder.decode
        names, gpu = _names_decoder.decode(names_j), _gpu_decoder.decode(gpu_j)
        launch_names, flows = _names_decoder.decode(launch_names_j), dec(flow_j)
        rest = len(_list_decoder.decode(rest_j)) if len(rest_j) > 2 else 0  # decoded for its checks, then dropped
        n_mem = len(mem_recs) // native.REC_SIZE
        self.total += len(names) + len(gpu) + len(launch_names) + len(flows) + rest + n_mem + insane + dropped
        self.insane += insane
        op_nulls = np.frombuffer(op_recs, REC)["nulls"]
        ops = _written(ops_j, op_nulls, len(names))
        _written(launch_j, np.frombuffer(launch_recs, REC)["nulls"], len(launch_names))
        # the ops whose JSON holds shapes, as the scanner saw them (most have none once slimmed), of
        # the names keep_shapes wants: their JSON is kept (its own copy), decoded if read (op_args)
        base, ids = len(self.op_table), self.op_names.add(names)
        shaped = np.flatnonzero(op_nulls & SHAPES)
        if len(shaped):
            wanted = shaped[self._wanted(ids[shaped])]
            for i, k in zip(wanted.tolist(), np.searchsorted(ops.at, wanted).tolist()):
                self.op_shapes[base + i] = ops.json[k].copy()
        self.op_table.add_records(op_recs)
        share = self._shared.setdefault
        pid = tid = None  # the last ones shared: a list's events come in runs of one thread
        for e in flows:  # ph and cat are shared already (_Routed)
            v = e.name
            e.name = share(v, v)
            v = e.pid
            e.pid = pid = pid if v == pid else share(v, v)
            v = e.tid
            e.tid = tid = tid if v == tid else share(v, v)
        self.flows += flows
        if len(gpu) != len(gpu_recs) // native.REC_SIZE:
            raise msgspec.DecodeError("the scanner's GPU JSON and records disagree")
        self.gpu_table.add_records(gpu_recs)
        self.gpu_names.add([g.name for g in gpu])
        self._add_configs([g.args for g in gpu])
        self.launch_table.add_records(launch_recs)
        self.launch_names.add(launch_names)
        self.memory.add_records(mem_recs)

    def _add_configs(self, configs: list) -> None:
        """The GPU activities' launch configurations made columns a few thousand at a time: a 1 MB
        chunk holds ~170 kernels, and per chunk numpy's fixed cost per call was most of the work
        (OWLv2 x4: 16 ms for 123 chunks)."""
        self._configs += configs
        if len(self._configs) >= CONFIGS_AT_ONCE:
            self._configs_to_columns()

    def _configs_to_columns(self) -> None:
        if self._configs:
            self._gpu_config.append(launch_config.of(self._configs))
            self._configs = []

    def _wanted(self, ids: np.ndarray) -> np.ndarray:
        """Whether keep_shapes wants the shapes of ops with these name ids. Only names seen holding
        shapes are asked (and can join the slim rules' drop list): a long trace's ProfilerStep#N
        names, never with shapes, would otherwise grow that list by each step."""
        n = len(self.op_names.values)
        if len(self._wanted_ids) < n:  # -1: not asked yet
            self._wanted_ids = np.concatenate((self._wanted_ids, np.full(n - len(self._wanted_ids), -1, np.int8)))
        got = self._wanted_ids[ids]
        new = list(dict.fromkeys(ids[got < 0].tolist()))  # not np.unique: it imports numpy.ma (~15 ms) on first use
        if new:
            values = self.op_names.values
            self._wanted_ids[new] = [self.shapes.wants(values[i]) for i in new]
            got = self._wanted_ids[ids]
        return got == 1

    def _add_shapes(self, op: int, name: str, a: Shapes) -> None:
        """Keep op's shapes when its name wants them, as copies: the decoded ones are views into the
        chunk's text and would keep all of it alive."""
        if self.shapes.wants(name):
            self.op_shapes[op] = Shapes(a.dims_raw.copy(), a.types_raw.copy(), a.concrete_raw.copy(),
                                        a.strides_raw.copy())

    def _sane(self, evs: list[Event]) -> list[Event]:
        """Only kept events are checked (dropped frames cannot poison a sum): NaN, infinities and
        absurd times are left out and counted. (The scanner checks the events it routes itself.)"""
        ok = [e for e in evs if -MAX_TS < e.ts < MAX_TS and 0.0 <= e.dur < MAX_DUR]
        self.insane += len(evs) - len(ok)
        share = self._shared.setdefault
        for e in ok:
            e.ph, e.cat, e.name, e.pid, e.tid = share(e.ph, e.ph), share(e.cat, e.cat), share(e.name, e.name), \
                share(e.pid, e.pid), share(e.tid, e.tid)
        return ok

    def launch_configs(self) -> launch_config.LaunchColumns:
        """The GPU activities' launch configurations so far, as columns."""
        self._configs_to_columns()
        return launch_config.joined(self._gpu_config)

    def result(self, warnings: list[str], truncated: bool = False) -> Events:
        d = self.doc
        if self.insane:
            warnings.append(f"skipped {self.insane} events whose time stamp or duration is not a plausible "
                            "number of microseconds (NaN, infinite, negative or beyond ~100 days)")
        return Events(
            op_table=self.op_table.finish(),
            op_names=self.op_names,
            op_shapes=self.op_shapes,
            launch_table=self.launch_table.finish(),
            launch_names=self.launch_names,
            gpu_table=self.gpu_table.finish(),
            gpu_names=self.gpu_names,
            gpu_config=self.launch_configs(),
            flows=self.flows,
            memory=self.memory.finish(),
            device_properties=d.deviceProperties or [],
            distributed=d.distributedInfo or {},
            tb_attn=d.tb_attn,
            total_events=self.total,
            warnings=warnings,
            truncated=truncated,
        )


class _Written(NamedTuple):
    at: np.ndarray  # the positions in the list whose JSON the scanner wrote (ascending)
    json: list[msgspec.Raw]  # that JSON, checked by msgspec


def _written(text: bytes, nulls: np.ndarray, n: int) -> _Written:
    """The JSON the scanner wrote of a list of ops or launches, with the position of each: only those
    with shapes, or with text outside the syntax the scanner checks itself (strict_value), which
    msgspec checks here. A mismatch with the records (never seen) is treated as a damaged chunk."""
    at = np.flatnonzero(nulls & JSON)
    json = _checked_decoder.decode(text)
    if len(json) != len(at) or len(nulls) != n:
        raise msgspec.DecodeError("the scanner's JSON and records disagree")
    return _Written(at, json)


def _holds_shapes(a: Shapes) -> bool:
    return not (a.dims_raw is _NULL and a.types_raw is _NULL and a.concrete_raw is _NULL and a.strides_raw is _NULL)


def _decode_chunked(text: bytes, head: bytes, keep_shapes: Callable[[str], bool] | None) -> _Kept | None:
    """Decode the event array a few MB at a time, keeping only what the analysis uses, so the
    Python frames that make up most of a trace never all exist at once (peak memory is the text
    plus the kept events, not the text plus every event). Returns None when the layout is not the
    plain one this expects; the caller then decodes the whole document at once."""
    if head == b"{":
        doc = _head_decoder.decode(text)  # validates the whole document; events are skipped
        raw = doc.traceEvents
        if raw is _NULL:
            return None
        view = memoryview(raw)
        n = len(view)
        start = text.find(b"[", max(text.find(b'"traceEvents"'), 0))
        if start < 0 or text[start:start + 32] != view[:32].tobytes() or text[start + n - 32:start + n] != view[-32:].tobytes():
            return None
        del view, raw
        doc.traceEvents = _NULL
        end = start + n - 1  # the closing bracket
    else:
        doc = _Head()
        start = text.find(b"[")
        end = text.rfind(b"]")
        if start < 0 or end <= start:
            return None
    kept = _Kept(doc, keep_shapes)
    pos = start + 1
    while pos < end:
        cut = text.find(b"},", pos + rules.CHUNK_BYTES, end)
        while cut >= 0:
            nxt = cut + 2
            while nxt < end and text[nxt] in b" \t\r\n":
                nxt += 1
            if nxt < end and text[nxt] == 0x7B:  # '{': an event starts here
                break
            cut = text.find(b"},", cut + 2, end)
        stop = end if cut < 0 else cut + 1
        kept.add(_list_decoder.decode(b"[" + text[pos:stop] + b"]"))
        pos = stop + 1
    return kept


def _decode_native(text: bytes, head: bytes, keep_shapes: Callable[[str], bool] | None) -> _Kept | None:
    """The fast path: the C scanner finds the event array's chunks and drops the events the
    analysis never reads (see native.py); only the rest is decoded. Returns None when the file is
    not laid out plainly (the slower paths then decide what it is)."""
    if head == b"[":
        start = text.find(b"[")
    else:
        m = _EVENTS_KEY.search(text)
        if m is None:
            return None
        start = m.end() - 1
    kept = _Kept(None, keep_shapes)
    end = native.each_chunk(text, start, rules.CHUNK_BYTES, _PREFILTER_RULES, kept.add_scanned, _ROUTE)
    if end is None:
        return None
    if head == b"[":
        if text[end + 1:].strip():
            return None  # something after the array: not a plain trace
        kept.doc = _Head()
        return kept
    # Everything but the events: the document must be valid JSON with the array where we found it
    # (not, say, inside a string that happens to spell "traceEvents").
    doc = _head_decoder.decode(text[:start] + b"[]" + text[end + 1:])
    if doc.traceEvents is _NULL or bytes(doc.traceEvents) != b"[]":
        return None
    doc.traceEvents = _NULL
    kept.doc = doc
    return kept


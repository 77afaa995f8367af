"""The Attention tab's backend: JSON routes under /data/plugin/tb_attn/ and the static frontend.

Each handler parses its parameters, asks the index (or a report) one question and responds. Every
parameter names something the index knows (a run, worker, span, stage), never a path, so no
request can reach a file outside the logdir. Every failure is a JSON ``{"error": message}`` with
a 4xx code a person can act on; an unexpected bug is logged and answered with a JSON 500, never a
traceback.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any, Callable

import msgspec
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers
from werkzeug.security import safe_join

from ..format.tags import STAGES
from . import cache as cache_mod
from . import compare_route, memory_route, report_views
from .index import ERROR, LOADING, NOT_A_TRACE, RunIndex, UnknownName, unreadable
from .layout import MAX_NAME, Source
from .pools import make_pool
from .ranks_route import RanksAnswers
from .sweeps import SweepIndex

logger = logging.getLogger(__name__)

PLUGIN_NAME = "tb_attn"
STATIC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
MAX_PARAM = MAX_NAME  # characters: the longest run, worker or span the listing shows (layout.MAX_NAME)
METHODS = ("GET", "HEAD")  # every route only reads
MAX_COMPARE = 8
PASSES = ("fwd", "bwd")
CONTENT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                 ".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml",
                 ".png": "image/png", ".html": "text/html", ".txt": "text/plain", ".woff2": "font/woff2"}


class ApiError(Exception):
    def __init__(self, code: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = headers or {}  # e.g. Retry-After on a 503


def _json(request, body: Any, code: int = 200):
    if not isinstance(body, bytes):
        body = msgspec.json.encode(body)
    return http_util.Respond(request, body, "application/json", code=code)


def _route(handler: Callable) -> Callable:
    """Turn ApiError into its JSON answer, and any bug into a JSON 500 (logged with its traceback)."""

    @functools.wraps(handler)
    def wrapped(self, request):
        try:
            if request.method not in METHODS:
                resp = _json(request, {"error": f"method {request.method[:20]} is not allowed here; "
                                                "the Attention plugin's routes only answer GET and HEAD"}, 405)
                resp.headers["Allow"] = ", ".join(METHODS)
                return resp
            return handler(self, request)
        except ApiError as exc:
            resp = _json(request, {"error": exc.message}, exc.code)
            for k, v in exc.headers.items():
                resp.headers[k] = v
            return resp
        except Exception as exc:
            logger.exception("tb-attn: %s %s failed", request.method, request.path)
            return _json(request, {"error": f"internal error in the Attention plugin ({type(exc).__name__}); "
                                            "details are in the TensorBoard log"}, 500)

    return wrappers.Request.application(wrapped)


def _param(request, name: str, *, required: bool = False, empty_ok: bool = False) -> str | None:
    """``empty_ok``: an empty value is a value (a snapshot named NAME.pickle is the span "" of worker NAME)."""
    values = request.args.getlist(name)
    if not values:
        if required:
            raise ApiError(400, f"missing parameter '{name}'")
        return None
    if len(values) > 1:
        raise ApiError(400, f"parameter '{name}' given {len(values)} times; give it once")
    if empty_ok and values[0] == "":
        return ""
    return _check(name, values[0])


def _int_param(request, name: str, *, required: bool = False, digits: int = 9) -> int | None:
    """A non-negative integer parameter, ASCII digits only ("²", "①", "٣" and "+1" are refused,
    not handed to int()); every numeric parameter of every route goes through here."""
    raw = _param(request, name, required=required)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > digits:
        raise ApiError(400, f"parameter '{name}' must be a small non-negative integer (ASCII digits, at most "
                            f"{digits}), not {raw[:40]!r}")
    return int(raw)


def _check(name: str, value: str) -> str:
    if len(value) > MAX_PARAM:
        raise ApiError(400, f"parameter '{name}' is too long ({len(value)} characters; at most {MAX_PARAM})")
    if not value:
        raise ApiError(400, f"parameter '{name}' is empty")
    if any(ord(c) < 32 for c in value):
        raise ApiError(400, f"parameter '{name}' contains control characters")
    return value


SETTLE_S = 2.0  # a file unchanged this long is taken as written (TB_ATTN_SETTLE_S)


def _settle_seconds() -> float:
    """TB_ATTN_SETTLE_S, or the default with a warning when it is not a number of seconds from 0 to
    a day: a typo must not keep TensorBoard from starting."""
    raw = os.environ.get("TB_ATTN_SETTLE_S", "").strip()
    if not raw:
        return SETTLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 86400.0:  # NaN fails too
        logger.warning("TB_ATTN_SETTLE_S=%r is not a number of seconds (0 to 86400); using %.1f", raw[:40], SETTLE_S)
        return SETTLE_S
    return value


def _check_patterns() -> None:
    """Say at start when TB_ATTN_PATTERNS names a bad file (every run then shows the same error)."""
    from ..attention.user_table import ENV, PatternError, env_paths, load_files

    try:
        rows = load_files(env_paths())
    except PatternError as exc:
        logger.error("tb-attn: %s: %s; runs are not analysed until it is fixed", ENV, exc)
        return
    if rows:
        logger.info("tb-attn: %d kernel families from %s", len(rows), ENV)


class AttentionPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context):
        flags = getattr(context, "flags", None)
        spec = getattr(flags, "logdir_spec", "") if flags is not None else ""
        # --logdir, else --logdir_spec (TensorBoard refuses both at once)
        self._logdir = Source.from_logdir(context.logdir) if context.logdir else Source.from_spec(spec or "")
        reload_s = getattr(flags, "reload_interval", 5.0) if flags is not None else 5.0
        settle_s = _settle_seconds()
        cache = cache_mod.ReportCache()
        _check_patterns()
        self._index = RunIndex(self._logdir, cache, make_pool(), settle_s=settle_s,
                               interval_s=float(reload_s) if reload_s and reload_s > 0 else None)
        self._sweeps = SweepIndex(self._logdir, interval_s=float(reload_s) if reload_s and reload_s > 0 else None)
        if self._logdir:
            self._sweeps.start()
            # Trim what earlier sessions left (old engine versions, runs long gone) without
            # holding up TensorBoard's start.
            threading.Thread(target=cache.prune, name="tb-attn-cache-prune", daemon=True).start()
            self._index.start()
        self._ranks = RanksAnswers(self._index)

    def close(self) -> None:
        """Stop scanning and the worker processes (TensorBoard has no hook; tests and bench call it)."""
        self._index.close()
        self._sweeps.close()

    @property
    def index(self) -> RunIndex:
        return self._index

    def get_plugin_apps(self):
        return {
            "/runs": self._serve_runs,
            "/report": self._serve_report,
            "/compare": self._serve_compare,
            "/ranks": self._serve_ranks,
            "/kernels": self._serve_kernels,
            "/call": self._serve_call,
            "/annotated": self._serve_annotated,
            "/memory": self._serve_memory,
            "/sweeps": self._serve_sweeps,
            "/sweep": self._serve_sweep,
            "/index.js": self._serve_index_js,
            "/static/*": self._serve_static,
            # Anything else under the plugin's prefix: a JSON 404 naming the routes, not
            # TensorBoard's plain-text one (TensorBoard tries this catch-all last).
            "/*": self._serve_unknown,
        }

    def is_active(self) -> bool:
        # Answers from what the background scan already knows; never lists the logdir here.
        return self._index.has_traces() or self._sweeps.has_sweeps()

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Attention")

    # -- helpers ---------------------------------------------------------------------------

    def _entry(self, request):
        if not self._logdir:
            raise ApiError(404, "TensorBoard was started without --logdir (or --logdir_spec), so there are no runs")
        run = _param(request, "run", required=True)
        try:
            return self._index.lookup(run, _param(request, "worker"), _param(request, "span", empty_ok=True))
        except UnknownName as exc:
            raise ApiError(404, str(exc)) from None

    def _trace_entry(self, request):
        """The entry of a route that needs a trace's report: a snapshot listed on its own is a 422."""
        e = self._entry(request)
        if e.is_snapshot:
            raise ApiError(422, NOT_A_TRACE.format(e.display))
        return e

    def _report_bytes(self, e) -> bytes | None:
        """The entry's report bytes; None while loading. Raises ApiError for a failed analysis."""
        if e.status == ERROR:
            raise ApiError(422, e.message or f"{e.display}: cannot be analysed")
        if e.status == LOADING:
            self._index.want(e)
            return None
        return self._index.report_bytes(e)

    def _report(self, e, view: type | None = None):
        body = self._report_bytes(e)
        if body is None:
            return None
        try:
            return msgspec.json.decode(body, type=view) if view else msgspec.json.decode(body)
        except msgspec.DecodeError as exc:  # a damaged cache entry (ValidationError is a DecodeError)
            raise ApiError(422, unreadable(e.display, exc)) from None

    @staticmethod
    def _loading(request, e):
        return _json(request, {"status": "loading", "run": e.run, "worker": e.worker, "span": e.span,
                               "phase": e.phase}, 202)

    # -- routes ----------------------------------------------------------------------------

    @_route
    def _serve_runs(self, request):
        return _json(request, self._index.runs_json())

    @_route
    def _serve_report(self, request):
        e = self._entry(request)
        body = self._report_bytes(e)
        if body is None:
            return self._loading(request, e)
        return _json(request, body)  # the stored bytes as they are: no decode, no re-encode

    @_route
    def _serve_kernels(self, request):
        e = self._trace_entry(request)
        stage, pas = _param(request, "stage"), _param(request, "pass")
        if stage is not None and stage not in STAGES:
            raise ApiError(400, f"unknown stage {stage!r}; expected one of: {', '.join(STAGES)}")
        if pas is not None and pas not in PASSES:
            raise ApiError(400, f"unknown pass {pas!r}; expected fwd or bwd")
        view = self._report(e, report_views.KernelsView)
        if view is None:
            return self._loading(request, e)
        return _json(request, report_views.kernels(view, stage, pas, {"run": e.run, "worker": e.worker, "span": e.span}))

    @_route
    def _serve_call(self, request):
        e = self._trace_entry(request)
        call_id = _int_param(request, "id", required=True)
        view = self._report(e, report_views.CallsView)
        if view is None:
            return self._loading(request, e)
        try:
            return _json(request, report_views.call(view, call_id, e.run))
        except LookupError as exc:
            raise ApiError(404, str(exc)) from None

    @_route
    def _serve_annotated(self, request):
        from . import annotated

        e = self._trace_entry(request)
        if e.status == ERROR:
            raise ApiError(422, e.message or f"{e.display}: cannot be analysed")
        return annotated.respond(request, e, self._index.pool, ApiError)

    @_route
    def _serve_memory(self, request):
        e = self._entry(request)
        try:
            points = memory_route.parse_points(_int_param(request, "points", digits=6))
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        view = self._report(e, memory_route.MemoryView)
        if view is None:
            return self._loading(request, e)
        return _json(request, memory_route.payload(view, points, {"run": e.run, "worker": e.worker, "span": e.span}))

    @_route
    def _serve_compare(self, request):
        if not self._logdir:
            raise ApiError(404, "TensorBoard was started without --logdir (or --logdir_spec), so there are no runs")
        names = [_check("run", r) for r in request.args.getlist("run")]
        # Optional: one worker per run (rank against rank: /compare?run=job&worker=rank0&run=job&worker=rank5)
        workers = [_check("worker", w) for w in request.args.getlist("worker")] or [None] * len(names)
        if len(workers) != len(names):
            raise ApiError(400, f"give one worker per run or none ({len(names)} runs, {len(workers)} workers)")
        if len(names) < 2:
            raise ApiError(400, "compare needs at least two runs: /compare?run=A&run=B")
        if len(names) > MAX_COMPARE:
            raise ApiError(400, f"compare takes at most {MAX_COMPARE} runs, not {len(names)}")
        if len(set(zip(names, workers))) != len(names):
            raise ApiError(400, "each run may be named only once in a comparison")
        try:
            code, body = compare_route.answer(self._index, names, workers)
        except UnknownName as exc:
            raise ApiError(404, str(exc)) from None
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        return _json(request, body, code)

    @_route
    def _serve_ranks(self, request):
        if not self._logdir:
            raise ApiError(404, "TensorBoard was started without --logdir (or --logdir_spec), so there are no runs")
        try:
            code, body = self._ranks.answer(_param(request, "run", required=True))
        except UnknownName as exc:
            raise ApiError(404, str(exc)) from None
        except ValueError as exc:  # a damaged cache entry
            raise ApiError(422, str(exc)) from None
        return _json(request, body, code)

    @_route
    def _serve_sweeps(self, request):
        return _json(request, self._sweeps.runs_json())

    @_route
    def _serve_sweep(self, request):
        if not self._logdir:
            raise ApiError(404, "TensorBoard was started without --logdir (or --logdir_spec), so there are no runs")
        run = _param(request, "run", required=True)
        try:
            return _json(request, self._sweeps.get(run, set(self._index.run_names())))
        except KeyError:
            known = [s["run"] for s in self._sweeps.runs_json()["sweeps"]]
            raise ApiError(404, f"no sweep run named {run[:80]!r}"
                                + (f" (sweeps: {', '.join(known[:20])})" if known else " (no sweep.jsonl found)")) from None
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None

    @_route
    def _serve_unknown(self, request):
        routes = ", ".join(r for r in self.get_plugin_apps() if r != "/*")
        raise ApiError(404, f"the Attention plugin has no route {request.path[:100]!r}; its routes: {routes}")

    @_route
    def _serve_index_js(self, request):
        return self._static_file(request, "index.js")

    @_route
    def _serve_static(self, request):
        prefix = f"/data/plugin/{PLUGIN_NAME}/static/"
        path = request.path
        if not path.startswith(prefix):
            raise ApiError(404, "not found")
        return self._static_file(request, path[len(prefix):])

    def _static_file(self, request, rel: str):
        # safe_join refuses "..", absolute paths and backslash tricks: only files under static/.
        full = safe_join(STATIC_DIR, rel) if rel else None
        if full is None or not os.path.isfile(full):
            raise ApiError(404, f"no static file {rel[:100]!r} in the Attention plugin"
                                + ("" if os.path.isfile(os.path.join(STATIC_DIR, "index.js"))
                                   else " (the frontend is not built: tb_attn_plugin/static/index.js is missing)"))
        ext = os.path.splitext(full)[1].lower()
        with open(full, "rb") as fh:
            body = fh.read()
        return http_util.Respond(request, body, CONTENT_TYPES.get(ext, "application/octet-stream"))



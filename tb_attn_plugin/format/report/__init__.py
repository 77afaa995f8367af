"""The report's format as typed msgspec Structs: the one source of report/schema.json and the frontend's types.

The report's sections (``report/sections.py``) still write plain dicts (the hot path stays as it was); these Structs say what
those dicts hold, and tests/test_format_generated.py converts real reports into ``Report`` with
``strict=True``, so a key the engine writes that is missing here (or a wrong type) fails a test.

Conventions: times are µs (``_us``), sizes bytes (``_bytes``), rates TFLOP/s (``tflops``) and TB/s
(``_tbs``); a unit that the name does not carry is in a description. ``None`` means unknown, never 0.
A field the engine writes only sometimes is ``T | UnsetType = UNSET`` (optional in the schema).

The parts live in small modules by section (rows, layers, roofline, reading, memory; base holds ``Row``
and the value types); ``Report`` and ``SnapshotReport``, the two documents, are in document.py, imported on first use
(``report.Report``): the engine builds its layers from layers.py without loading every section's Structs.

To add a section (or a field):
  1. add its Struct(s) in the module of its part, or a new module here (subclass ``Row`` with
     ``kw_only=True``; a docstring, and ``doc(...)`` for a field whose unit is not in its
     name), and a field on ``Report`` below (or on the section it belongs to);
  2. write its builder in its room and one row of ``report/sections.py`` (a field of a section: in
     that section's builder);
  3. run ``python -m tb_attn_plugin.format.generate``: it rewrites report/schema.json,
     frontend/src/tags.ts, types.ts and memory_types.ts, and from format/routes.py
     plugin/routes.schema.json and frontend/src/route_types.ts. A Struct reachable from
     ``MemorySection`` goes to memory_types.ts, every other report one to types.ts and a route
     answer's own to route_types.ts, as an interface of the same name; a Literal equal to one of
     ``TS_ALIASES`` is written as that alias's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .document import TS_ALIASES, TS_CONSTANTS, UNSET, MemorySection, Report, SnapshotReport

__all__ = ["Report", "SnapshotReport", "MemorySection", "TS_ALIASES", "TS_CONSTANTS", "UNSET"]


def __getattr__(name: str) -> Any:
    """The documents and the names above, from document.py on first use (PEP 562)."""
    if name in __all__:
        from . import document

        return getattr(document, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

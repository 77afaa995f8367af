"""Process-wide tagging state, shared by the hooks and the user-region API.

``active`` is read by every wrapped call, so it is a plain module attribute (one dict lookup).
Code that may be traced by torch.compile must check ``torch.compiler.is_compiling()`` *before*
reading it: dynamo folds that check to a constant, so it never guards on ``active`` (a guard would
recompile the model each time the window opens or closes).
"""

from __future__ import annotations

import threading

active = False  # True while a profiling window records (warmup or active steps)


class _Local(threading.local):
    def __init__(self):
        self.depth = 0  # tagged calls open on this thread: calls nested in one are part of it, not new calls
        self.open: list = []  # module-hook ranges open on this thread, innermost last (pre/post pairs)
        self.global_open: list = []
        self.scopes: list = []  # attention-module scope ranges open on this thread (hooks.Tagger._scope_pre)


local = _Local()

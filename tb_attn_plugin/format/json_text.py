"""The CLI's JSON text: ``json.dumps(doc, indent=1)``'s exact bytes, at C speed."""

from __future__ import annotations

import json
import re

import msgspec

# json.dumps's indenting encoder is pure Python (about 0.08 s on a 3 MB report); its compact encoder
# is C. msgspec.json.format re-indents that compact text keeping every token as written (ASCII
# escapes, Python's float repr), which gives the indented encoder's bytes. Its parser rejects an
# escaped lone surrogate (a path's undecodable byte, as Python's surrogateescape gives it), so each
# surrogate escape's "\u" is parked as a non-ASCII character, which the ASCII text cannot otherwise hold.
_SURROGATE_U = re.compile(r"\\\\|\\u(?=d[89a-f])")
_PARKED = "\x80"


def dumps(doc, indent: int | None = 1) -> str:
    """``json.dumps(doc, indent=indent)``, byte for byte; ``doc`` must hold finite numbers only."""
    text = json.dumps(doc)
    if indent is None:
        return text
    parked = "\\ud" in text
    if parked:  # escaped backslashes are matched too, so that "\\ud800" (a backslash, then text) stays
        text = _SURROGATE_U.sub(lambda m: _PARKED if m.group() == "\\u" else m.group(), text)
    out = msgspec.json.format(text, indent=indent)
    return out.replace(_PARKED, "\\u") if parked else out

"""The CLI's JSON text: ``json.dumps(doc, indent=1)``'s exact bytes, at C speed."""

from __future__ import annotations

import codecs
import json
import re

import msgspec

# The tokens come from msgspec's encoder, which is C throughout: json.dumps's compact encoder is C
# too but about 8x slower on a report (27 against 3 ms on OWLv2 x4's 2.2 MB of JSON: about 3% of that
# report's CLI instructions). msgspec's tokens are json.dumps's but for three
# things: it writes DEL and non-ASCII characters as they are (escaped here as json.dumps does:
# \uXXXX, a surrogate pair past the BMP); it writes floats outside Python's fixed-notation range its
# own way (1e16 and 0.00001 where repr gives 1e+16 and 1e-05); and it refuses what json.dumps may take
# (a lone surrogate, a key of another type). A document with such a float (or with text in a string
# that looks like one: only ever a false alarm) or that msgspec refuses takes json.dumps.
_DIGITS_AS_0 = bytes.maketrans(b"123456789", b"000000000")
_ESCAPE_ERRORS = "tb_attn.json_escape"  # the codec error handler (registered below) that writes \uXXXX

# json.dumps's indenting encoder is pure Python (about 0.08 s on a 3 MB report). msgspec.json.format
# re-indents compact text keeping every token as written (ASCII escapes, Python's float repr), which
# gives the indented encoder's bytes (indent 0: one line, json.dumps's ", " and ": "). Its parser
# rejects an escaped lone surrogate (a path's undecodable byte, as Python's surrogateescape gives it),
# so each surrogate escape's "\u" is parked as a non-ASCII character, which the ASCII text cannot
# otherwise hold.
_SURROGATE_U = re.compile(r"\\\\|\\u(?=d[89a-f])")
_PARKED = "\x80"


def dumps(doc, indent: int | None = 1) -> str:
    """``json.dumps(doc, indent=indent)``, byte for byte, for any ``doc`` json.dumps encodes that holds
    finite numbers only."""
    text = _tokens(doc)
    if text is not None:  # its only surrogate escapes are whole pairs, which format keeps as written
        return msgspec.json.format(text, indent=0 if indent is None else indent)
    text = json.dumps(doc, default=msgspec.to_builtins)  # a section's Struct as msgspec writes it, floats as repr
    if indent is None:
        return text
    parked = "\\ud" in text
    if parked:  # escaped backslashes are matched too, so that "\\ud800" (a backslash, then text) stays
        text = _SURROGATE_U.sub(lambda m: _PARKED if m.group() == "\\u" else m.group(), text)
    out = msgspec.json.format(text, indent=indent)
    return out.replace(_PARKED, "\\u") if parked else out


def _tokens(doc) -> str | None:
    """json.dumps(doc)'s tokens, compact and ASCII, from msgspec; None where they may differ."""
    try:
        raw = msgspec.json.encode(doc)
    except (TypeError, ValueError, OverflowError):  # UnicodeEncodeError is a ValueError
        return None
    if _float_unlike_repr(raw):
        return None
    text = raw.decode("ascii", _ESCAPE_ERRORS)  # in one pass, the few non-ASCII characters escaped
    return text.replace("\x7f", "\\u007f") if "\x7f" in text else text


def _float_unlike_repr(raw: bytes) -> bool:
    """Whether msgspec's text may hold a number that repr writes otherwise: one with an exponent (a
    digit, 'e', then a digit or '-'; found with every digit made 0), or a fixed one under 1e-4
    (0.0000...). Each place found is read back to its token's start: a number token starts the text
    or follows ':', ',', '[' (or '"': a float as a key)."""
    zeros = raw.translate(_DIGITS_AS_0)
    for text, pattern in ((zeros, b"0e"), (raw, b"0.0000")):
        i = text.find(pattern)
        while i >= 0:
            j = i
            while j > 0 and zeros[j - 1] in b"0.-":
                j -= 1
            starts_token = j == 0 or raw[j - 1] in b':,["'
            if pattern == b"0e":  # a digit, 'e', then a digit or '-'
                unlike = zeros[i + 2:i + 3] in (b"0", b"-")
            else:  # the whole number is 0.0000... or -0.0000...
                unlike = raw[j:i] in (b"", b"-")
            if starts_token and unlike:
                return True
            i = text.find(pattern, i + 1)
    return False


def _escape(err: UnicodeError) -> tuple[str, int]:
    """The decoding error handler: the UTF-8 character that starts at the byte ASCII refused (the text
    is msgspec's, valid UTF-8), escaped as json.dumps escapes it."""
    assert isinstance(err, UnicodeDecodeError)  # registered for decoding only
    at, lead = err.start, err.object[err.start]
    end = at + (2 if lead < 0xE0 else 3 if lead < 0xF0 else 4)  # the UTF-8 sequence's length
    c = ord(err.object[at:end].decode())  # err.object: the bytes being decoded
    if c < 0x10000:
        return f"\\u{c:04x}", end
    c -= 0x10000
    return f"\\u{0xD800 | (c >> 10):04x}\\u{0xDC00 | (c & 0x3FF):04x}", end


codecs.register_error(_ESCAPE_ERRORS, _escape)

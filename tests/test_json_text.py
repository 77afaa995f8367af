"""The CLI's JSON text (text/json_text.py) is json.dumps's, byte for byte, on the values reports hold."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.text.json_text import _tokens, dumps

CASES = [
    {"reports": [{"a": 1e-05, "b": 1e16, "c": -0.0, "d": 2 ** 70, "e": [], "f": {}, "g": [[], [{}]], "h": None,
                  "i": True, "j": 0.1 + 0.2, "k": 5e-324, "l": 1.7976931348623157e308}]},
    # a path with an undecodable byte (surrogateescape), next to text that only looks like an escape
    {"path": "/tmp/x\udcff.json", "text": "\\ud800", "both": "\\\ud800", "pair": "\U0001F600", "half": "\ud83d"},
    {"ctrl": "".join(map(chr, range(32))) + "\x7f\u00b7\u2028", "\udc80": "\\\\\\ud9ff"},
    {}, [], "x\udcffy", 1.5,
]


@pytest.mark.parametrize("doc", CASES)
@pytest.mark.parametrize("indent", [1, 2, None])
def test_same_text_as_json_dumps(doc, indent):
    assert dumps(doc, indent) == json.dumps(doc, indent=indent)


# Documents msgspec's encoder writes (the fast path, text/json_text._tokens) next to ones it leaves
# to json.dumps: non-ASCII text past the BMP too, floats as keys, keys json.dumps alone takes.
FAST = {"line": "Owlv2Attention (eager): L 5185×5185, 2.1 TB/s · 3.35 TB/s (63%) — µs \U0001F600",
        "ctrl": "".join(map(chr, range(32))) + "\x7f", "n": [0.0001, 123456789012345.67, 1e15, -2.5, 2 ** 64]}
SLOW = [{1e16: 1, 1e-05: 2}, {1.5: 3, 7: 4, "k": [1e16]}, {True: 1, None: 2}, {"a": "1e5", "b": ["0.00001"]}]


@pytest.mark.parametrize("doc", [FAST] + SLOW)
@pytest.mark.parametrize("indent", [1, None])
def test_fast_and_careful_paths_agree_with_json_dumps(doc, indent):
    assert dumps(doc, indent) == json.dumps(doc, indent=indent)


def test_a_plain_report_takes_msgspecs_encoder():
    assert _tokens(FAST) == json.dumps(FAST, separators=(",", ":"))
    assert all(_tokens(doc) is None for doc in SLOW)


# Floats at repr's switches to an exponent (1e-4, 1e16) and text made of a number's characters, so
# the fast path's check for floats written otherwise (_float_unlike_repr) is tried where it decides.
_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e-4, 9.99e-5, 1e-5, -1.5e-6, 1e15, 9999999999999998.0, 1e16, -2.5e20, 123456789012345680.0])
_text = st.text() | st.text(alphabet="0123456789e-.:,[\"{}x\x7f\u00b7\U0001F600")
_scalars = st.none() | st.booleans() | st.integers(-2 ** 80, 2 ** 80) | _text | _floats
_docs = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(_text | st.integers() | _floats, inner, max_size=4), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(_docs)
def test_any_finite_document_reads_as_json_dumps_writes_it(doc):
    for indent in (1, None):
        assert dumps(doc, indent) == json.dumps(doc, indent=indent)

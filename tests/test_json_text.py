"""The CLI's JSON text (format/json_text.py) is json.dumps's, byte for byte, on the values reports hold."""

import json

import pytest

from tb_attn_plugin.format.json_text import dumps

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

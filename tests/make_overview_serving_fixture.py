"""Writes frontend/test/fixtures/overview_serving.json: the overview of a built serving trace (four decode
calls and two 4,096-token prompts through SDPA on an H100, tests/test_phases_serving.py's builder).
Run from the repository root: python tests/make_overview_serving_fixture.py"""

import json
import tempfile
from pathlib import Path

from tb_attn_plugin.report.build import analyze_file
from tests.kernel_traces import TraceBuilder
from tests.test_phases_serving import _sdpa_call

b = TraceBuilder()
for i in range(4):
    _sdpa_call(b, i, [8, 32, 1, 128], [8, 32, 4096, 128], 220.0)
for i in range(2):
    _sdpa_call(b, 4 + i, [1, 32, 4096, 128], [1, 32, 4096, 128], 700.0)
with tempfile.TemporaryDirectory() as d:
    r = analyze_file(str(b.write(Path(d) / "serving.json")))
out = Path("frontend/test/fixtures/overview_serving.json")
out.write_text(json.dumps({"overview": r["overview"]}, indent=1) + "\n")
print(out)

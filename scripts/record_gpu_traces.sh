#!/usr/bin/env bash
# Records the GPU traces that issue 3 asks for, in one command on a lent GPU machine (the device
# tool's `run`): the demo model, forward and backward, with every SDPA backend pinned (flash,
# efficient, cudnn, math), default SDPA, hand-written eager attention, torch.compile and compiled
# FlexAttention; one profiled step each (small windows), gzipped by the collector. The demo profiles
# with memory=True, so on CUDA each trace gets its allocator snapshot beside it
# ({worker}.{time}.memory.pickle, issue 10): those become the snapshot test fixtures. Ends with
# tb-attn's report of each trace, and one archive of the runs plus the GPU and versions.
#
# That machine has torch, tensorboard and transformers but not msgspec, and reaches no index, so
# prepare the wheel here first (ignored by git, carried with the working tree):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl msgspec
# then, through the device tool:   bash scripts/record_gpu_traces.sh "$OUT"
# and commit what comes back under tests/fixtures/gpu/ with a note of the GPU and versions.
#
# Try it on the CPU (only the variants a CPU has):
#   DEVICE=cpu VARIANTS="eager sdpa sdpa-flash sdpa-math" PY=.venv/bin/python bash scripts/record_gpu_traces.sh /tmp/gpu
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/record_gpu_traces.sh OUTPUT_DIR}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
VARIANTS=${VARIANTS:-"eager sdpa sdpa-flash sdpa-efficient sdpa-cudnn sdpa-math compiled flex"}
LENGTHS=${LENGTHS:-1024}
mkdir -p "$OUT"
if ! "$PY" -c "import msgspec" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --find-links .whl msgspec
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - "$DEVICE" > "$OUT/versions.txt" <<'EOF'
import platform, sys
import torch
dev = sys.argv[1]
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "hip", getattr(torch.version, "hip", None), "cudnn", torch.backends.cudnn.version())
if dev.startswith("cuda"):
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, f"{p.total_memory >> 30} GiB", f"sm_{p.major}{p.minor}", p.multi_processor_count, "SMs")
EOF
cat "$OUT/versions.txt"
# One variant at a time: a backend this GPU or build lacks fails its own run, not the others.
failed=()
for v in $VARIANTS; do
  if ! "$PY" -m demo --device "$DEVICE" --variants "$v" --lengths $LENGTHS --batch 2 --steps 1 \
      --logdir "$OUT/runs" 2>&1 | sed -n '/calls\|rror/p'; then
    failed+=("$v")
  fi
done
# The six variants of "Attention is all you profile" (demo/post.py), forward only, bf16 as the post:
# tests/test_reading.py checks the post's table against them once they are under tests/fixtures/gpu/post/.
if ! "$PY" -m demo --post --device "$DEVICE" --dtype "${POST_DTYPE:-bfloat16}" --lengths $LENGTHS --batch 2 --steps 1 \
    --logdir "$OUT/runs" 2>&1 | sed -n '/calls\|rror/p'; then
  failed+=("post")
fi
"$PY" -m tb_attn_plugin.cli report "$OUT/runs" > "$OUT/reports.txt" 2>&1 || true
# Each CUDA memory snapshot on its own too (the trace's report above already joins it).
: > "$OUT/snapshot_reports.txt"
for snap in "$OUT"/runs/*/*.memory.pickle; do
  [ -e "$snap" ] || { echo "no memory snapshots written (no CUDA?)" >> "$OUT/snapshot_reports.txt"; break; }
  "$PY" -m tb_attn_plugin.cli report "$snap" >> "$OUT/snapshot_reports.txt" 2>&1 || true
done
tar czf "$OUT/gpu_traces.tgz" -C "$OUT" runs versions.txt reports.txt snapshot_reports.txt
echo "wrote $OUT/gpu_traces.tgz; failed variants: ${failed[*]:-none}"

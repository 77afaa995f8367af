"""Kineto traces built event by event, in which only kernel names can reveal attention.

They follow the linking rules of shared/docs/attention-taxonomy.md: a kernel's ``correlation``
names its launch; a CUDA graph replay is one ``cudaGraphLaunch`` that every replayed kernel points
at; ops and modules carry names that say nothing about attention.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HOST_PID, HOST_TID = 4242, 4242
GPU_PID, STREAM = 0, 7


class TraceBuilder:
    def __init__(self):
        self.events: list[dict] = []
        self.corr = 1000
        self.t = 1_000_000.0  # µs
        self.gpu_t = 1_000_000.0

    def op(self, name: str, ts: float, dur: float, cat: str = "cpu_op") -> dict:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts, "dur": dur,
              "args": {"External id": len(self.events)}}
        self.events.append(ev)
        return ev

    def launch(self, ts: float, name: str = "cudaLaunchKernel") -> int:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": HOST_PID, "tid": HOST_TID,
                            "ts": ts, "dur": 2.0, "args": {"correlation": self.corr}})
        return self.corr

    def kernel(self, name: str, corr: int, dur: float, gap: float = 1.0) -> dict:
        ev = {"ph": "X", "cat": "kernel", "name": name, "pid": GPU_PID, "tid": STREAM, "ts": self.gpu_t, "dur": dur,
              "args": {"correlation": corr, "device": 0, "stream": STREAM}}
        self.gpu_t += dur + gap
        self.events.append(ev)
        return ev

    def graph_replay(self, invocations: list[list[tuple[str, float]]], between: list[tuple[str, float]] = ()) -> None:
        """One cudaGraphLaunch whose kernels are ``invocations`` (each a list of (name, µs)), with
        ``between`` kernels (an MLP, a norm) after each invocation."""
        corr = self.launch(self.t, "cudaGraphLaunch")
        self.t += 10
        for inv in invocations:
            for name, dur in inv:
                self.kernel(name, corr, dur)
            for name, dur in between:
                self.kernel(name, corr, dur)

    def eager_calls(self, invocations: list[list[tuple[str, float]]], op_name: str = "mylib::fused_op",
                    module: str = "nn.Module: Block_") -> None:
        """Each invocation launched by one renamed op inside one renamed module."""
        for i, inv in enumerate(invocations):
            start = self.t
            self.op(f"{module}{i}", start, 100.0, cat="python_function")
            self.op(op_name, start + 1, 90.0)
            t = start + 2
            for name, dur in inv:
                self.kernel(name, self.launch(t), dur)
                t += 5
            self.t += 120

    def compiled_region(self, invocations: list[list[tuple[str, float]]]) -> None:
        """torch.compile on a GPU: inside one ``Torch-Compiled Region``, every Triton kernel has a
        cpu_op of its own name that launches it with cuLaunchKernel."""
        kernels = [k for inv in invocations for k in inv]
        start = self.t
        self.op("Torch-Compiled Region: 0/0", start, 10.0 * len(kernels) + 10)
        t = start + 1
        for name, dur in kernels:
            self.op(name, t, 8.0)
            self.corr += 1
            self.events.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": HOST_PID,
                                "tid": HOST_TID, "ts": t + 1, "dur": 2.0, "args": {"correlation": self.corr}})
            self.kernel(name, self.corr, dur)
            t += 10
        self.t = t + 20

    def step(self) -> None:
        self.events.insert(0, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": HOST_PID,
                               "tid": HOST_TID, "ts": 999_000.0, "dur": max(self.t, self.gpu_t) - 999_000.0 + 10})

    def doc(self) -> dict:
        return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                          "totalGlobalMem": 85520809984, "computeMajor": 9,
                                                          "computeMinor": 0, "numSms": 132}],
                "traceEvents": self.events, "traceName": "built by tests/kernel_traces.py"}

    def write(self, path: Path) -> Path:
        self.step()
        data = json.dumps(self.doc()).encode()
        path.write_bytes(gzip.compress(data) if str(path).endswith(".gz") else data)
        return path


MLP = [("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)", 20.0),
       ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)", 5.0)]

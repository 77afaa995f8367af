"""What the step overview recognises by name, as data: one row per fact, with a real example and its source.

The GEMM kernels outside attention calls are the kernel table's ``gemm`` family (attention/patterns.py),
so one list of GEMM names serves both questions.
"""

from __future__ import annotations

from typing import NamedTuple

from ..format.linear_regex import Linear, compile_linear


class NameRule(NamedTuple):
    role: str  # what a match means (see each table)
    pattern: str  # re.search on the name
    example: str  # a real name that matches
    source: str  # where the name comes from


# Communication kernels (NCCL, RCCL, vLLM's custom all-reduce). role: the collective library.
COMMUNICATION = (
    NameRule("nccl", r"^ncclKernel_",
             "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
             "trace: hta_a100_negative_log_softmax_fwdbwd (NCCL before 2.19; RCCL keeps these names)"),
    NameRule("nccl", r"^ncclDevKernel_",
             "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             "source: NVIDIA/nccl src/device/generate.py (ncclDevKernel_<coll>_<op>_<type>_<algo>_<proto>, NCCL >= 2.19); "
             "SGLang and vLLM profiles quote it"),
    NameRule("custom_all_reduce", r"cross_device_reduce_[12]stage",
             "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
             "source: vllm-project/vllm csrc/custom_all_reduce.cuh (SGLang's copy: sglang::cross_device_reduce_1stage)"),
)

# GPU activities that are copies, by direction (kineto writes the direction in the memcpy's name).
MEMCPY_DIRECTIONS = (
    NameRule("HtoD", r"HtoD", "Memcpy HtoD (Pageable -> Device)", "trace: tl_h100_owlv2_eager_bmm_softmax"),
    NameRule("DtoH", r"DtoH", "Memcpy DtoH (Device -> Pageable)", "source: pytorch/kineto libkineto/src/output_json.cpp (memcpy names)"),
    NameRule("DtoD", r"DtoD", "Memcpy DtoD (Device -> Device)", "trace: hta_a100_negative_log_softmax_fwdbwd"),
    NameRule("PtoP", r"PtoP", "Memcpy PtoP (Device -> Device)", "source: pytorch/kineto libkineto/src/CuptiActivity.cpp (peer copies)"),
)

# Host calls that make the CPU wait for the GPU: idle GPU time under one of them is waiting on a
# synchronisation, the rest of idle is waiting on the host (HTA's idle time breakdown).
SYNC_CALLS = (
    NameRule("sync", r"^(cuda|hip)DeviceSynchronize$", "cudaDeviceSynchronize", "trace: hta_a100_negative_log_softmax_fwdbwd"),
    NameRule("sync", r"^(cuda|hip)StreamSynchronize$", "cudaStreamSynchronize", "source: CUDA runtime API (cudaStreamSynchronize), as kineto's cuda_runtime events name it"),
    NameRule("sync", r"^(cuda|hip)EventSynchronize$", "cudaEventSynchronize", "trace: hta_a100_negative_log_softmax_fwdbwd"),
    NameRule("sync", r"^cu(Ctx|Stream|Event)Synchronize$", "cuStreamSynchronize", "source: CUDA driver API, as kineto's cuda_driver events name it"),
)

# Host ops of the training loop that PyTorch names: data loading and the optimizer.
HOST_OPS = (
    NameRule("data_loading", r"^enumerate\(DataLoader\)#",
             "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
             "source: pytorch/pytorch torch/utils/data/dataloader.py (_BaseDataLoaderIter.__next__'s record_function)"),
    NameRule("optimizer", r"^Optimizer\.step#", "Optimizer.step#SGD.step",
             "trace: hta_a100_negative_log_softmax_fwdbwd; source: pytorch/pytorch torch/optim/optimizer.py (profile_hook_step)"),
)


def first_role(rules: tuple[NameRule, ...], name: str) -> str | None:
    """The role of the first row whose pattern the name matches, else None."""
    if _any(rules).search(name) is None:  # most names match no row: one search says so
        return None
    rows = _ROWS.get(id(rules))
    if rows is None:  # compiled only once a name matches: a report pays for the compiles it uses
        rows = _ROWS[id(rules)] = [(compile_linear(r.pattern), r.role) for r in rules]
    return next((role for rx, role in rows if rx.search(name)), None)


def role_pattern(rules: tuple[NameRule, ...], role: str) -> Linear:
    """One pattern matching a name that some row of ``role`` matches."""
    key = (id(rules), role)
    got = _ROLE.get(key)
    if got is None:
        got = _ROLE[key] = compile_linear("|".join(f"(?:{r.pattern})" for r in rules if r.role == role))
    return got


def _any(rules: tuple[NameRule, ...]) -> Linear:
    got = _ANY.get(id(rules))
    if got is None:
        got = _ANY[id(rules)] = compile_linear("|".join(f"(?:{r.pattern})" for r in rules))
    return got


_ROLE: dict[tuple, Linear] = {}
_ANY: dict[int, Linear] = {}
_ROWS: dict[int, list] = {}

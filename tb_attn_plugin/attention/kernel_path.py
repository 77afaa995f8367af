"""Attention calls from the kernel sequence alone, for kernels that no CPU op launched.

A trace recorded with ``activities=[ProfilerActivity.CUDA]`` (no CPU ops, no runtime calls), or
kernels whose launch the trace lacks, still shows eager attention on each GPU stream: a batched GEMM
(QKᵀ), a few elementwise kernels (scale, mask), a softmax-family kernel, maybe dropout, a batched
GEMM (AV); and in backward the mirror, GEMMs around ``softmax_*_backward``. The kernel families of
patterns.py say which kernel is a GEMM or a softmax (log-softmax rows are excluded there, so a
loss never pairs); a GEMM counts as batched when its grid has z > 1 (cuBLAS and CUTLASS put the batch
there: OWLv2's QKᵀ ``cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1`` ran on [328, 3, 16]
for 16 heads, its projections on z = 1), or when the grid says nothing (none recorded; GRID_NOT_BATCH). A backward joins the latest forward on its stream
not yet joined (autograd runs the layers in reverse). Such calls have lower confidence than calls
found from ops: the report says how many were found so (report/run.py).
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

import numpy as np

from . import patterns as P

# Kernels allowed between a GEMM and its softmax (scale, mask, dropout, copies): T5's relative position
# bias runs 23 between QKᵀ and the softmax (trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph, first T5 layer).
REACH = 32

# GEMM kernels whose grid does not carry the batch in z, so z = 1 is no evidence against a batched
# GEMM: (pattern, real example, source).
GRID_NOT_BATCH: tuple[tuple[str, str, str], ...] = (
    (r"^Cijk_", "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x128x64_MI16x16x1_SN_LDSB1_AFC1_AG0_AFEM1_AFEM1_ASEM1_CB0_CD1_1_CLR1_CADS0_DTLA0_DTLB0_DTLM0_DTVA0_DTVB0_DTVMXSA0_DTVMXSB0_DTVSM0_DPLB0_EPS0_ELFLR0_EMLLn1_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_HPLR0_ISA942_ICIW0_IU1_K1_LDSTI0_LBSPPA1024_LBSPPB512_LBSPPMXSA0_LBSPPMXSB0_LBSPPM0_LPA32_LPB16_LPMXSA0_LPMXSB0_LPM0_LRVW8_LWPMn1_MIAV0_MIWT2_4_MXLIBL_MXSFNS_MO40_MGRIPM1_NTn1_NTA0_NTB4_NTC0_NTD4_NTE0_NTMXSA0_NTMXSB0_NTM0_NTWS0_NVn1_NVA0_NVB0_NVC0_NVD0_NVE0_NVMXSA0_NVMXSB0_NVM0_NVWS0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SGROB0_SIA3_SS1_SPO0_SRVW0_SSO0_SVW2_SK0_SKFTR0_SKXCCM0_SIP1_SGRO0_TDMI0_TDMS0_TIN0_THn1_THA0_THB0_THC0_THD0_THE0_THMXSA0_THMXSB0_THM0_THWS0_TLDS1_TLDSM1_ULSGRO0_USL1_USLMX0_UIOFGRO0_UPLRP0_USFGROn1_USI0_VSn1_VWA2_VWB4_WSGRA0_WSGRB0_WS64_WG32_8_1",
     "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (T5 attention's AV on grid [65536, 1, 1]: Tensile names a batch index k in Cijk and folds it into x)"),
)

_GRID_NOT_BATCH = re.compile("|".join(p for p, _, _ in GRID_NOT_BATCH))

OTHER, GEMM, SOFTMAX_FWD, SOFTMAX_BWD, DROPOUT, BARRIER = range(6)


@lru_cache(maxsize=65536)
def kernel_class(name: str) -> int:
    """What a kernel is to the score path: a GEMM, a softmax (forward, backward), dropout, a
    barrier (an attention kernel or its helper, a memcpy: no eager call spans it), or other."""
    fam = P.kernel_family(name)
    if fam is None:
        return BARRIER if name.startswith(("Memcpy", "Memset")) else OTHER
    if fam.stage == "matmul":
        return GEMM
    if fam.stage == "softmax":
        return SOFTMAX_BWD if fam.pass_ == "bwd" else SOFTMAX_FWD
    if fam.stage == "dropout":
        return DROPOUT
    if fam.stage == "fused" or fam.stage in P.HELPER_STAGES:
        return BARRIER
    return OTHER


class KernelCall:
    """One call found from kernels: its kernels (positions in Linked.kernels) with (stage, in backward)."""

    __slots__ = ("kernels", "stages")

    def __init__(self) -> None:
        self.kernels: list[int] = []
        self.stages: list[tuple[str, bool]] = []


def _streams(L, eligible: np.ndarray) -> list[np.ndarray]:
    """The eligible kernels of each stream (pid, tid), in time order: sorted and split at C speed
    on the kernels' columns (the Kernel objects where a trace lacks them)."""
    at = np.flatnonzero(eligible)
    if not len(at):
        return []
    kt = L.kernel_table
    ts = np.asarray(L.kernel_ts, np.float64)[at]
    try:
        pid, tid = np.asarray(kt["pid"])[at], np.asarray(kt["tid"])[at]
        keys = np.stack([pid, tid]).astype(np.int64)
    except (KeyError, TypeError, ValueError, IndexError):
        by: defaultdict[tuple, int] = defaultdict(lambda: len(by))
        ks = L.kernels
        keys = np.array([[by[(str(ks[i].pid), str(ks[i].tid))] for i in at.tolist()], np.zeros(len(at), np.int64)])
    order = np.lexsort((ts, keys[1], keys[0]))
    s = at[order]
    k0, k1 = keys[0][order], keys[1][order]
    cut = np.flatnonzero((k0[1:] != k0[:-1]) | (k1[1:] != k1[:-1])) + 1
    return np.split(s, cut)


def find(L, claimed: np.ndarray, only_unlaunched: bool = True, classify=kernel_class) -> list[KernelCall]:
    """The calls the kernel sequence shows among kernels not ``claimed`` (bool per kernel); with
    ``only_unlaunched`` among those no op launched. ``classify``: a kernel name's class (the safety
    net passes a wider one, safety.net_class)."""
    n = len(L.kernels)
    if not n:
        return []
    names = L.kernel_names
    cls_of_name = np.array([classify(v) for v in names.values], np.int8)
    cls = cls_of_name[np.asarray(names.ids, np.int64)]
    softmax = (cls == SOFTMAX_FWD) | (cls == SOFTMAX_BWD)
    eligible = ~claimed
    if only_unlaunched:
        eligible &= np.asarray(L.kernel_op, np.int64) < 0
    if not (softmax & eligible).any() or not ((cls == GEMM) & eligible).any():
        return []  # most traces: no unclaimed softmax kernel between GEMMs, nothing to order
    cfg = L.kernel_config
    gz = cfg.grid_z if cfg is not None and len(cfg) == n else np.zeros(n, np.int64)
    ids = np.asarray(names.ids, np.int64)
    no_evidence = np.array([bool(_GRID_NOT_BATCH.search(v)) for v in names.values], bool)[ids]
    batched = (gz > 1) | (gz == 0) | no_evidence  # 0: no grid recorded, the GEMM's name alone is the evidence
    calls: list[KernelCall] = []
    for seq in _streams(L, eligible):
        c = cls[seq]
        open_fwd: list[KernelCall] = []
        for p in np.flatnonzero((c == SOFTMAX_FWD) | (c == SOFTMAX_BWD)).tolist():
            bwd = c[p] == SOFTMAX_BWD
            before = _gemms(c, p, -1, bwd)
            after = _gemms(c, p, 1, bwd)
            if not before or not after or not batched[seq[before]].any() or not batched[seq[after]].any():
                continue
            lo, hi = min(before), max(after)
            if bwd:
                kc = open_fwd.pop() if open_fwd else KernelCall()
                if not kc.kernels:
                    calls.append(kc)
            else:
                kc = KernelCall()
                calls.append(kc)
                open_fwd.append(kc)
            for j in range(lo, hi + 1):
                kc.kernels.append(int(seq[j]))
                kc.stages.append((_stage(c[j], j, p, bwd), bool(bwd)))
    return calls


def _gemms(c: np.ndarray, p: int, step: int, bwd: bool) -> list[int]:
    """The GEMM next to the softmax at ``p`` in direction ``step`` past at most REACH elementwise
    kernels (in backward also the GEMM right beside it: each matmul's backward is two), or []."""
    j, gap = p + step, 0
    while 0 <= j < len(c):
        k = c[j]
        if k == GEMM:
            out = [j]
            if bwd and 0 <= j + step < len(c) and c[j + step] == GEMM:
                out.append(j + step)
            return out
        if k in (SOFTMAX_FWD, SOFTMAX_BWD, BARRIER):
            return []
        gap += 1
        if gap > REACH:
            return []
        j += step
    return []


def _stage(k: int, j: int, p: int, bwd: bool) -> str:
    if j == p:
        return "softmax"
    if k == GEMM:
        return ("av_matmul" if bwd else "qk_matmul") if j < p else ("qk_matmul" if bwd else "av_matmul")
    if k == DROPOUT:
        return "dropout"
    if (j < p) != bwd:
        return "scale_mask"  # forward: before the softmax; backward: after it
    return "other"

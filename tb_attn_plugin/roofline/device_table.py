"""The GPUs users profile on, as data: dense peaks per precision, memory bandwidth, identifying facts, source.

Every row: ``name`` as the report shows it; ``pattern``, a regular expression searched in kineto's
``deviceProperties`` name (rows are tried in order, so a more specific pattern comes first);
``example``, a real device name that the pattern must match; ``vendor``; ``arch`` (compute
capability for NVIDIA, gfx target for AMD); ``units`` (SMs or CUs as ``numSms`` reports them);
``memory_gb`` (decimal GB, as datasheets state it); ``tflops`` per precision, dense (no 2:4
sparsity), tensor/matrix units where the device has them, None where the precision has no matrix
path (the report then says which precision it used); ``bandwidth_tbs`` (device memory, TB/s);
``source``, the datasheet the numbers come from. Vendors quote sparse figures as 2x dense; those
were halved. AMD MI250X/MI250 rows describe one GCD, the device PyTorch sees (two per package).
"""

from __future__ import annotations

import msgspec


PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


class DeviceRow(msgspec.Struct, frozen=True):
    name: str
    pattern: str
    example: str
    vendor: str
    arch: str
    units: int
    memory_gb: float
    tflops: dict[str, float | None] = msgspec.field(default_factory=dict)
    bandwidth_tbs: float = 0.0
    source: str = ""
    by_facts: bool = True  # a candidate when the name is missing (False: a variant indistinguishable by its facts)


def _tf(fp32, tf32, bf16, fp16, fp8) -> dict[str, float | None]:
    return {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": fp16, "fp8": fp8}


DEVICES: tuple[DeviceRow, ...] = (
    # --- NVIDIA Blackwell ---------------------------------------------------------------------
    DeviceRow("NVIDIA GB200", r"\bGB200\b", "NVIDIA GB200", "NVIDIA", "10.0", 148, 186,
              _tf(80.0, 1250.0, 2500.0, 2500.0, 5000.0), 8.0,
              "NVIDIA GB200 NVL72 datasheet (per GPU: rack figures / 72, sparse / 2)"),
    DeviceRow("NVIDIA B200", r"\bB200\b", "NVIDIA B200", "NVIDIA", "10.0", 148, 180,
              _tf(75.0, 1100.0, 2250.0, 2250.0, 4500.0), 8.0,
              "NVIDIA HGX B200 datasheet (per GPU, sparse / 2)"),
    # --- NVIDIA Hopper ------------------------------------------------------------------------
    DeviceRow("NVIDIA GH200", r"\bGH200\b", "NVIDIA GH200 480GB", "NVIDIA", "9.0", 132, 96,
              _tf(67.0, 494.5, 989.5, 989.5, 1979.0), 4.0, "NVIDIA GH200 Grace Hopper Superchip datasheet"),
    DeviceRow("NVIDIA H200 NVL", r"\bH200 NVL\b", "NVIDIA H200 NVL", "NVIDIA", "9.0", 132, 141,
              _tf(60.0, 417.5, 835.5, 835.5, 1670.5), 4.8, "NVIDIA H200 datasheet (H200 NVL column)",
              by_facts=False),
    DeviceRow("NVIDIA H200 SXM", r"\bH200\b", "NVIDIA H200", "NVIDIA", "9.0", 132, 141,
              _tf(67.0, 494.5, 989.5, 989.5, 1979.0), 4.8, "NVIDIA H200 datasheet (H200 SXM column)"),
    DeviceRow("NVIDIA H100 NVL", r"\bH100 NVL\b", "NVIDIA H100 NVL", "NVIDIA", "9.0", 132, 94,
              _tf(60.0, 417.5, 835.5, 835.5, 1670.5), 3.9, "NVIDIA H100 datasheet (H100 NVL column)"),
    DeviceRow("NVIDIA H100 PCIe", r"\bH100 PCIe\b", "NVIDIA H100 PCIe", "NVIDIA", "9.0", 114, 80,
              _tf(51.0, 378.0, 756.0, 756.0, 1513.0), 2.0, "NVIDIA H100 datasheet (H100 PCIe column)"),
    DeviceRow("NVIDIA H100 SXM", r"\bH100\b", "NVIDIA H100 80GB HBM3", "NVIDIA", "9.0", 132, 80,
              _tf(67.0, 494.5, 989.5, 989.5, 1979.0), 3.35,
              "NVIDIA H100 datasheet (H100 SXM column); FlashAttention benchmarks/benchmark_attn.py"),
    # --- NVIDIA Ampere / Ada / Volta / Turing -------------------------------------------------
    DeviceRow("NVIDIA A100 80GB PCIe", r"\bA100\b.*80GB PCIe", "NVIDIA A100 80GB PCIe", "NVIDIA", "8.0", 108, 80,
              _tf(19.5, 156.0, 312.0, 312.0, None), 1.935, "NVIDIA A100 datasheet (80GB PCIe column)",
              by_facts=False),
    DeviceRow("NVIDIA A100 80GB", r"\bA100\b.*80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA", "8.0", 108, 80,
              _tf(19.5, 156.0, 312.0, 312.0, None), 2.039, "NVIDIA A100 datasheet (80GB SXM column)"),
    DeviceRow("NVIDIA A100 40GB", r"\bA100\b", "NVIDIA A100-SXM4-40GB", "NVIDIA", "8.0", 108, 40,
              _tf(19.5, 156.0, 312.0, 312.0, None), 1.555, "NVIDIA A100 datasheet (40GB column)"),
    DeviceRow("NVIDIA A10G", r"\bA10G\b", "NVIDIA A10G", "NVIDIA", "8.6", 80, 24,
              _tf(31.2, 35.0, 70.0, 70.0, None), 0.6, "AWS EC2 G5 instance specifications (A10G)"),
    DeviceRow("NVIDIA A10", r"\bA10\b", "NVIDIA A10", "NVIDIA", "8.6", 72, 24,
              _tf(31.2, 62.5, 125.0, 125.0, None), 0.6, "NVIDIA A10 datasheet"),
    DeviceRow("NVIDIA L40S", r"\bL40S\b", "NVIDIA L40S", "NVIDIA", "8.9", 142, 48,
              _tf(91.6, 183.0, 362.05, 362.05, 733.0), 0.864, "NVIDIA L40S datasheet"),
    DeviceRow("NVIDIA L4", r"\bL4\b", "NVIDIA L4", "NVIDIA", "8.9", 58, 24,
              _tf(30.3, 60.0, 121.0, 121.0, 242.5), 0.3, "NVIDIA L4 datasheet"),
    DeviceRow("NVIDIA RTX 4090", r"\bRTX 4090\b", "NVIDIA GeForce RTX 4090", "NVIDIA", "8.9", 128, 24,
              _tf(82.6, 82.6, 165.2, 165.2, 330.3), 1.008,
              "NVIDIA Ada GPU architecture whitepaper (FP32 accumulate)"),
    DeviceRow("NVIDIA V100", r"\bV100\b", "Tesla V100-SXM2-32GB", "NVIDIA", "7.0", 80, 32,
              _tf(15.7, None, None, 125.0, None), 0.9, "NVIDIA V100 datasheet (SXM2 column)"),
    DeviceRow("NVIDIA T4", r"\bT4\b", "Tesla T4", "NVIDIA", "7.5", 40, 16,
              _tf(8.1, None, None, 65.0, None), 0.32, "NVIDIA T4 datasheet"),
    # --- AMD Instinct -------------------------------------------------------------------------
    DeviceRow("AMD Instinct MI355X", r"\bMI355X\b", "AMD Instinct MI355X", "AMD", "gfx950", 256, 288,
              _tf(157.3, None, 2516.6, 2516.6, 5033.2), 8.0, "AMD Instinct MI355X datasheet"),
    DeviceRow("AMD Instinct MI325X", r"\bMI325X\b", "AMD Instinct MI325X", "AMD", "gfx942", 304, 256,
              _tf(163.4, 653.7, 1307.4, 1307.4, 2614.9), 6.0, "AMD Instinct MI325X datasheet"),
    DeviceRow("AMD Instinct MI300X", r"\bMI300X\b", "AMD Instinct MI300X", "AMD", "gfx942", 304, 192,
              _tf(163.4, 653.7, 1307.4, 1307.4, 2614.9), 5.3,
              "AMD Instinct MI300X datasheet (ROCm blog: about 708 TFLOP/s BF16 achievable)"),
    DeviceRow("AMD Instinct MI250X (one GCD)", r"\bMI250X\b", "AMD Instinct MI250X", "AMD", "gfx90a", 110, 64,
              _tf(47.9, None, 191.5, 191.5, None), 1.6,
              "AMD Instinct MI250X datasheet, halved per GCD (ROCm MI250 microarchitecture: 1.6 TB/s per GCD)"),
    DeviceRow("AMD Instinct MI250 (one GCD)", r"\bMI250\b", "AMD Instinct MI250", "AMD", "gfx90a", 104, 64,
              _tf(45.3, None, 181.0, 181.0, None), 1.6, "AMD Instinct MI250 datasheet, halved per GCD"),
    DeviceRow("AMD Instinct MI210", r"\bMI210\b", "AMD Instinct MI210", "AMD", "gfx90a", 104, 64,
              _tf(45.3, None, 181.0, 181.0, None), 1.6, "AMD Instinct MI210 datasheet"),
)

# What HIP reports as computeMajor.computeMinor for each gfx target (gfx90a reports 9.0 like gfx900,
# so it identifies by CU count and memory only).
GFX_COMPUTE = {"gfx942": "9.4", "gfx950": "9.5"}

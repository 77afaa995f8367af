"""How the sweep's numbers are defined, as the text that the CLI prints and the Sweep view shows (no torch)."""

from .flops import CONVENTION as FLOPS

PEAK_MEMORY = {
    "cuda": "torch.cuda.max_memory_allocated() over one call after reset_peak_memory_stats(), minus what was "
            "allocated before the call",
    "cpu": "torch.profiler(profile_memory=True) over one call: the highest running sum of the CPU allocator's "
           "[memory] events (bytes allocated during the call and not yet freed)",
}
TIMING = "median and IQR of torch.utils.benchmark.Timer.blocked_autorange after warm-up calls"
PCT_OF_PEAK = ("TFLOP/s over the GPU's data-sheet dense 16-bit peak (roofline/devices.py); "
               "none on the CPU or for float32")

__all__ = ["FLOPS", "PEAK_MEMORY", "TIMING", "PCT_OF_PEAK"]

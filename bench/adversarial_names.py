"""Time of the built-in name tables on names built to make a backtracking regex slow (issue 47, item 7).

    PYTHONPATH=. python bench/adversarial_names.py [KiB]      # this checkout; default 64 KiB names

Run it with PYTHONPATH pointing at another checkout to time that one (the names are built here).
Each name targets one shape of backtracking: a greedy ``\\w*`` / ``[^(]*`` before a literal searched at
every start (kernel families, frame rules), alternations under a repeat (op rules), digit runs (device
names). tests/test_hostile_inputs_47.py checks the answers on the same names; no test times them.
"""

from __future__ import annotations

import sys
import time


def names(n: int) -> dict[str, str]:
    """name -> a kernel/op/frame/device name of about ``n`` characters."""
    return {
        "flash_traits": "flash_a<" * (n // 8),  # \b(flash::)?flash_\w+<[^(]*\bFlash_bwd_kernel_traits<
        "flashinfer_prefill": "flashinfer::" + "PrefillWith" * (n // 11),  # flashinfer::\w*PrefillWith\w*Kernel
        "attn_func": "Attn" * (n // 4) + "!",  # \w*(Attn|Attention)\w*(Func|Function)\w* (op rules, fullmatch)
        "backward_frames": "aBackward" * (n // 9),  # (\w+Backwards?\d*)(::apply|...) (memory frame rules)
        "digits": "1" * n,  # \d+\s*GB (device names), \w+ everywhere
        "sm_mla": "sm90::" + "mla" * (n // 3),  # sm\d+::\w*mla\w*_kernel
        "word": "a" * n,
    }


def tables():
    from tb_attn_plugin.attention import helper_kernels, patterns as P
    from tb_attn_plugin.memory import frame_rules
    from tb_attn_plugin.reading import fingerprint
    from tb_attn_plugin.roofline import devices
    from tb_attn_plugin.trace import window

    return {
        "kernel_family": P.kernel_family.__wrapped__,  # unwrapped: no cache between runs
        "op_rule": P.op_rule.__wrapped__,
        "attention_module": P.is_attention_module.__wrapped__,
        "fingerprint": fingerprint.decode,
        "helper_kernel": helper_kernels.helper_kind,
        "frame_node": frame_rules.node_name,
        "frame_rule": lambda nm: frame_rules.match.__wrapped__("/usr/lib/python3/site-packages/x.py", nm),
        "device": devices.by_name,
        "launch_api": window.is_kernel_launch,
    }


def main() -> None:
    n = int(sys.argv[1]) * 1024 if len(sys.argv) > 1 else 64 * 1024
    worst = 0.0
    for label, name in names(n).items():
        for table, fn in tables().items():
            t = time.perf_counter()
            fn(name)
            dt = time.perf_counter() - t
            worst = max(worst, dt)
            if dt >= 0.01:
                print(f"{label:20s} {table:18s} {dt:8.3f} s", flush=True)
    print(f"slowest: {worst:.3f} s over {len(names(n))} names x {len(tables())} tables, {n // 1024} KiB each")


if __name__ == "__main__":
    main()

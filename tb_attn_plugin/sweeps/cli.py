"""The ``tb-attn sweep`` subcommand: its arguments, and bad ones as one line with exit status 2."""

from __future__ import annotations

import argparse
import sys

from .grid import BACKENDS, DTYPES, GridError

EPILOG = """examples:
  tb-attn sweep --device cpu --backends math,flash,eager --seq-len 128:2048:x2 --batch 1,4 --logdir runs/sweep
  tb-attn sweep --device cuda --backends math,flash,efficient,cudnn,flex,eager --seq-len 128:16384:x2 \\
      --batch 1,8 --heads 16 --head-dim 64 --dtype bfloat16 --causal --pass fwd+bwd --logdir runs/sweep-h100
Rerunning the same command measures only the cells not yet in LOGDIR/sweep.jsonl."""


def add_parser(sub, parents=()) -> None:
    p = sub.add_parser("sweep", help="time attention backends over sequence length x batch (torch.utils.benchmark)",
                       parents=list(parents), epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logdir", required=True, help="where sweep.jsonl, HParams and scalars go (e.g. runs/sweep)")
    # Choices are checked by the grid, so that a wrong value is one line, like every other mistake.
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--backends", default="math,flash,efficient,cudnn,eager",
                   help=f"comma-separated, any of {','.join(BACKENDS)} (default: %(default)s)")
    p.add_argument("--module", action="append", default=[], metavar="PKG.MOD:FACTORY",
                   help="also sweep your own attention: factory(heads=, head_dim=, kv_heads=, dtype=, device=, "
                        "causal=) returns (fn, make_inputs(batch, seq_len)); repeatable")
    p.add_argument("--seq-len", default="128,512,2048",
                   help="lengths: 128,512 or a range 128:8192:x2 (default: %(default)s)")
    p.add_argument("--batch", default="1,8", help="batch sizes, as --seq-len (default: %(default)s)")
    p.add_argument("--heads", type=int, default=16, help="query heads of every cell (default: %(default)s)")
    p.add_argument("--head-dim", type=int, default=64,
                   help="head dimension D of q, k and v (default: %(default)s)")
    p.add_argument("--kv-heads", type=int, default=None,
                   help="key/value heads for grouped-query attention (default: --heads)")
    p.add_argument("--dtype", default=None, help=f"{'|'.join(DTYPES)} (default: bfloat16 on cuda, float32 on cpu)")
    p.add_argument("--causal", action="store_true",
                   help="causal attention (is_causal=True; FLOPs counted halved); default: not causal")
    p.add_argument("--pass", dest="pass_", metavar="PASS", default="fwd", help="fwd or fwd+bwd (default: %(default)s)")
    p.add_argument("--min-run-time", type=float, default=0.2,
                   help="seconds per cell for blocked_autorange (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before timing (default: %(default)s)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch and the Timer (default: torch's)")
    p.add_argument("--memory-cap", default=None, metavar="SIZE",
                   help="a real memory limit (e.g. 2G): CUDA's per-process fraction, on the CPU an address-space "
                        "limit in a child process; cells beyond it are recorded as oom")
    p.add_argument("--profile", nargs="?", const=True, default=False, metavar="SEQ_LENS",
                   help="record one tb-attn trace per cell (or only at these lengths) under LOGDIR/profiles/")
    p.add_argument("--no-summaries", "--no-hparams", dest="no_summaries", action="store_true",
                   help="do not write the sweep's TensorBoard scalars (one run, LOGDIR)")
    p.add_argument("--hparams-logdir", default=None, metavar="DIR",
                   help="also write one TensorBoard HParams session per cell under DIR/<name of LOGDIR>/: a logdir of "
                        "its own (e.g. sweeps-hparams, beside runs/), since TensorBoard selects no run by default "
                        "once a logdir holds more than 40")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")

    def one_line_error(message: str):  # argparse would print the whole usage first
        print(f"tb-attn: error: sweep: {message} (tb-attn sweep --help lists the options)", file=sys.stderr)
        sys.exit(2)

    p.error = one_line_error


def run(args) -> int:
    try:
        from .runner import run_sweep

        result = run_sweep(args.logdir, backends=args.backends if args.backends else None, seq_len=args.seq_len,
                           batch=args.batch, heads=args.heads, head_dim=args.head_dim, kv_heads=args.kv_heads,
                           dtype=args.dtype, causal=args.causal, pass_=args.pass_, device=args.device,
                           module=args.module, min_run_time=args.min_run_time, warmup=args.warmup,
                           memory_cap=args.memory_cap, profile=args.profile, threads=args.threads,
                           summaries=not args.no_summaries, hparams_logdir=args.hparams_logdir,
                           progress=not args.quiet)
    except GridError as exc:
        print(f"tb-attn: error: sweep: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"tb-attn: error: sweep needs torch and tensorboard (pip install 'tb-attn[collector]'): {exc}",
              file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"tb-attn: error: sweep: {exc}", file=sys.stderr)
        return 2
    return 130 if result.interrupted else 0

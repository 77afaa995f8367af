"""Snapshot pickles in the format torch.cuda.memory._dump_snapshot writes (documented fields only),
built by the tests with a known peak, and hostile pickles."""

from __future__ import annotations

import os
import pickle

from tb_attn_plugin.format import tags

B, H, L = 2, 4, 256
SCORE = B * H * L * L * 2  # bf16 score matrix: 1 MiB
BEFORE = 3 << 20  # a block allocated before the ring buffer's first entry, still live at the end
SEGMENT = 20 << 20


def _entry(action, addr, size, t, frames=None, **more):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
         "frames": frames if frames is not None else [{"filename": "/home/u/model.py", "line": 7, "name": "forward"}]}
    e.update(more)
    return e


def known_snapshot() -> tuple[dict, dict]:
    """(snapshot, expected): one tagged eager attention call whose softmax holds two score matrices.
    Live bytes: BEFORE, then +4096 (q), +SCORE (qk), +SCORE (softmax), -SCORE (qk freed), +4096 (av)."""
    call = tags.call_name(layer="model.layers.7.self_attn", impl="eager", b=B, hq=H, hkv=H, lq=L, lk=L, d=64,
                          dtype="bfloat16", causal=False)
    A = 0x7F0000000000
    trace = [
        _entry("segment_alloc", A, SEGMENT, 10),
        _entry("alloc", A + 0x10000, 4096, 11),
        _entry("alloc", A + 0x20000, SCORE, 21),
        _entry("alloc", A + 0x200000, SCORE, 31),  # the peak: BEFORE + 4096 + 2·SCORE
        _entry("free_requested", A + 0x20000, SCORE, 41),
        _entry("free_completed", A + 0x20000, SCORE, 41),
        _entry("alloc", A + 0x20000, 4096, 51),
        _entry("free_requested", A + 0x10000, 4096, 61),
        _entry("free_completed", A + 0x10000, 4096, 61),
        _entry("oom", 0, 1 << 40, 45, device_free=123),
        _entry("segment_free", A + SEGMENT, 2 << 20, 70),
        _entry("segment_alloc", A + SEGMENT, 4 << 20, 71),
    ]
    trace.sort(key=lambda e: e["time_us"])
    ann = [{"name": call, "stage": "START", "device": 0, "time_us": 20},
           {"name": tags.stage_name("qk"), "stage": "START", "device": 0, "time_us": 20},
           {"name": tags.stage_name("qk"), "stage": "END", "device": 0, "time_us": 25},
           {"name": tags.stage_name("softmax"), "stage": "START", "device": 0, "time_us": 30},
           {"name": tags.stage_name("softmax"), "stage": "END", "device": 0, "time_us": 46},
           {"name": call, "stage": "END", "device": 0, "time_us": 50}]
    # At the end: BEFORE and SCORE (softmax output) and 4096 (av) live; 2 MiB more reserved.
    blocks = [{"address": A, "size": BEFORE, "requested_size": BEFORE, "state": "active_allocated", "frames": []},
              {"address": A + 0x200000, "size": SCORE, "requested_size": SCORE, "state": "active_allocated", "frames": []},
              {"address": A + 0x20000, "size": 4096, "requested_size": 4096, "state": "active_allocated", "frames": []},
              {"address": A + 0x30000, "size": SEGMENT - BEFORE - SCORE - 4096, "state": "inactive", "frames": []}]
    segments = [{"device": 0, "address": A, "total_size": SEGMENT + (2 << 20), "allocated_size": 0, "active_size": 0,
                 "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                 "is_expandable": False, "frames": [], "blocks": blocks}]
    snap = {"segments": segments, "device_traces": [trace], "allocator_settings": {"expandable_segments": False},
            "external_annotations": ann}
    expected = {"peak": BEFORE + 4096 + 2 * SCORE, "score": SCORE, "layer": "model.layers.7.self_attn",
                "stage": "softmax", "reserved_at_peak": SEGMENT}
    return snap, expected


class RunsACommand:
    """Unpickling this would run a shell command (the classic __reduce__ attack)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malicious_pickle(marker: str) -> bytes:
    snap, _ = known_snapshot()
    snap["device_traces"][0].append(RunsACommand(marker))
    return pickle.dumps(snap)


# Snapshots as real users record them: no tb-attn annotations, every entry with its stack frames,
# innermost first ({filename, line, name}; a Python frame's name is its co_name:
# torch/csrc/profiler/python/combined_traceback.cpp). Names and files below are real:
#   torch/nn/functional.py softmax / dropout; torch/nn/modules/module.py _call_impl /
#   _wrapped_call_impl; torch/nn/modules/linear.py forward (pytorch/pytorch)
#   transformers/models/llama/modeling_llama.py eager_attention_forward, repeat_kv, forward (huggingface/transformers)
#   at::_ops::<op>::call, torch::autograd::generated::<Node>::apply, torch::autograd::Engine::evaluate_function,
#   torch::CapturedTraceback::gather, gather_with_cpp (C++ frames of stacks="all": pytorch/pytorch
#   torch/csrc/cuda/memory_snapshot.cpp; torch/cuda/_memory_viz.py filters the same names)
TORCH = "/opt/conda/lib/python3.11/site-packages/torch"
HF = "/opt/conda/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py"


def py(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


def cpp(name, filename="??"):
    return {"filename": filename, "line": 0, "name": name}


GATHER = [cpp("torch::unwind::unwind()"), cpp("torch::CapturedTraceback::gather(bool, bool, bool)"),
          cpp("gather_with_cpp()", "torch/csrc/cuda/memory_snapshot.cpp"),
          cpp("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, "
              "unsigned long, CUstream_st*)")]
MODULE = [py(f"{TORCH}/nn/modules/module.py", 1762, "_call_impl"),
          py(f"{TORCH}/nn/modules/module.py", 1751, "_wrapped_call_impl")]
OUTER = MODULE + [py(HF, 331, "forward")] + MODULE + [py("/home/u/train.py", 48, "train_step"),
                                                      py("/home/u/train.py", 90, "main")]
ATTN_FN = [py(HF, 190, "eager_attention_forward"), py(HF, 262, "forward")] + OUTER  # LlamaAttention.forward
ENGINE = [cpp("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
              "torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> "
              "const&)", "torch/csrc/autograd/engine.cpp"),
          cpp("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
              "torch/csrc/autograd/engine.cpp")]


def ops(*names):
    """C++ op frames, innermost first: ops("bmm", "matmul") is at::_ops::bmm inside at::_ops::matmul."""
    return [cpp(f"at::_ops::{n}::call(at::Tensor const&, at::Tensor const&)") for n in names]


def node(name, *inner):
    return (GATHER + ops(*inner) + [cpp(f"torch::autograd::generated::{name}::apply(std::vector<at::Tensor, "
                                        "std::allocator<at::Tensor> >&&)",
                                        "torch/csrc/autograd/generated/Functions.cpp")] + ENGINE)


class History:
    """A device trace written entry by entry: alloc / free with their stacks, times in µs."""

    def __init__(self, device=0, base=0x7F0000000000):
        self.trace: list[dict] = []
        self.t = 0
        self.next = base
        self.device = device

    def alloc(self, size, frames):
        self.t += 1
        addr = self.next
        self.next += -(-size // 512) * 512 + 512
        self.trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": self.t,
                           "frames": frames})
        return addr, size

    def free(self, block, frames=()):
        self.t += 1
        addr, size = block
        for a in ("free_requested", "free_completed"):
            self.trace.append({"action": a, "addr": addr, "size": size, "stream": 0, "time_us": self.t,
                               "frames": list(frames)})


def framed_snapshot(histories: list[History], live: dict[int, list] | None = None) -> dict:
    """The document _dump_snapshot writes for these histories (one per device), no annotations."""
    segments = []
    for h in histories:
        blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": []}
                  for a, s in (live or {}).get(h.device, [])]
        segments.append({"device": h.device, "address": 0x7F0000000000, "total_size": 1 << 34, "allocated_size": 0,
                         "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks})
    traces = [[] for _ in range(max(h.device for h in histories) + 1)]
    for h in histories:
        traces[h.device] = h.trace
    return {"segments": segments, "device_traces": traces, "allocator_settings": {"expandable_segments": False}}


def release(name):
    """A free's stack when autograd node ``name`` drops the tensors it saved (SavedVariable::reset_data)."""
    return GATHER[:2] + [cpp("torch::autograd::SavedVariable::reset_data()"),
                         cpp(f"torch::autograd::generated::{name}::release_variables()")] + ENGINE


def llama_training_step(layers=2, b=2, hq=8, hkv=2, lq=64, lk=64, d=64, itemsize=2,
                        releases=True) -> tuple[dict, dict]:
    """(snapshot, expected) of a GQA llama training step recorded with stacks="all": per layer the
    eager attention's allocations (repeat_kv copies, QK^T, scale, mask, float32 softmax, its cast,
    dropout, AV), an MLP whose activations have exactly the score's size (d_ff·L = H·L·L), then the
    backward through autograd nodes only (``releases``: with the free of the softmax output that
    SoftmaxBackward0 saved, as a stacks="all" record shows it)."""
    score = b * hq * lq * lk * itemsize
    qkv = b * hq * lq * d * itemsize
    h = History()
    att_bytes = 0
    scores = 0
    kept = []  # forward blocks saved for the backward, freed in it
    for layer in range(layers):
        proj = h.alloc(qkv, GATHER + ops("mm", "matmul", "linear") + [py(f"{TORCH}/nn/modules/linear.py", 125,
                                                                         "forward")] + MODULE + ATTN_FN[1:])
        kv = [h.alloc(qkv, GATHER + ops("clone", "reshape") + [py(HF, 176, "repeat_kv")] + ATTN_FN) for _ in "kv"]
        qk = h.alloc(score, GATHER + ops("bmm", "matmul") + ATTN_FN)
        scaled = h.alloc(score, GATHER + ops("mul_Tensor") + ATTN_FN)
        masked = h.alloc(score, GATHER + ops("masked_fill_Scalar") + ATTN_FN)
        soft = h.alloc(2 * score, GATHER + ops("_softmax", "softmax_int") + [py(f"{TORCH}/nn/functional.py", 2140,
                                                                               "softmax")] + ATTN_FN)
        cast = h.alloc(score, GATHER + ops("_to_copy", "to_dtype") + ATTN_FN)
        drop = h.alloc(score, GATHER + ops("native_dropout", "dropout") + [py(f"{TORCH}/nn/functional.py", 1425,
                                                                              "dropout")] + ATTN_FN)
        out = h.alloc(qkv, GATHER + ops("bmm", "matmul") + ATTN_FN)
        att_bytes += 2 * qkv + 6 * score + qkv + score
        scores += 6  # qk, scaled, masked, softmax (float32), dropout, and not the cast (a copy)
        scores -= 1  # the cast is made by _to_copy
        for blk in (qk, scaled):
            h.free(blk)
        # The MLP: activations of exactly the score's size, outside attention.
        mlp = [h.alloc(score, GATHER + ops("mm", "matmul", "linear") + [py(f"{TORCH}/nn/modules/linear.py", 125,
                                                                           "forward")] + MODULE + OUTER)
               for _ in range(2)]
        kept.append((kv, masked, soft, cast, drop, out, mlp, proj))
    # Backward: autograd nodes only, in reverse.
    bwd_att = 0
    bwd_scores = 0
    for kv, masked, soft, cast, drop, out, mlp, proj in reversed(kept):
        g = [h.alloc(score, node("MmBackward0", "mm")) for _ in range(2)]  # MLP grads: outside attention
        av_p = h.alloc(score, node("BmmBackward0", "bmm"))  # grad of the probabilities
        av_v = h.alloc(qkv, node("BmmBackward0", "bmm"))
        gd = h.alloc(score, node("NativeDropoutBackward0", "native_dropout_backward"))
        gs = h.alloc(2 * score, node("SoftmaxBackward0", "_softmax_backward_data"))
        if releases:  # the node drops the softmax output it saved: links its run to this call
            h.free(soft, release("SoftmaxBackward0"))
        gm = h.alloc(score, node("MaskedFillBackward0", "where_self"))
        h.alloc(qkv, node("BmmBackward0", "bmm"))  # dQ and dK: kept to the end of the step
        h.alloc(qkv, node("BmmBackward0", "bmm"))
        bwd_att += 2 * score + 3 * qkv + score + 2 * score
        bwd_scores += 3  # dropout, softmax and mask backward (the AV backward's grad is not counted)
        for blk in (masked, cast, drop, out, *mlp, *g, av_p, av_v, gd, gs, gm) + (() if releases else (soft,)):
            h.free(blk)
        h.free(proj)
    doc = framed_snapshot([h])
    return doc, {"score": score, "fwd_scores": scores, "bwd_scores": bwd_scores, "att_fwd_bytes": att_bytes,
                 "att_bwd_bytes": bwd_att, "layer": "modeling_llama.py:eager_attention_forward",
                 "module_fwd_bytes": qkv * layers}  # the q projection in LlamaAttention.forward


def hand_written_inference(calls=3, b=1, h=12, lq=128, lk=128, itemsize=2, device=0) -> tuple[dict, dict]:
    """(snapshot, expected) of inference through a user's own ``scaled_dot_product_attention``,
    recorded with Python stacks only (``stacks="python"``): matmuls have no frame, F.softmax does."""
    score = b * h * lq * lk * itemsize
    fn = [py("/home/u/model.py", 21, "scaled_dot_product_attention"), py("/home/u/model.py", 58, "forward")] + \
        MODULE + [py("/home/u/model.py", 80, "forward")] + MODULE + [py("/home/u/infer.py", 12, "<module>")]
    hist = History(device)
    for _ in range(calls):
        s = hist.alloc(score, fn)  # q @ k.transpose(-2, -1) / sqrt(d): no frame of its own
        p = hist.alloc(score, [py(f"{TORCH}/nn/functional.py", 2140, "softmax")] + fn)
        hist.free(s)
        o = hist.alloc(b * h * lq * 64 * itemsize, fn)
        hist.free(p)
        mlp = hist.alloc(4 * score, [py(f"{TORCH}/nn/modules/linear.py", 125, "forward")] + MODULE +
                         [py("/home/u/model.py", 70, "forward")] + MODULE)
        hist.free(mlp)
        hist.free(o)
    return framed_snapshot([hist]), {"score": score, "calls": calls, "layer": "model.py:scaled_dot_product_attention"}


def llama_sdpa_training(layers=3, qkv=4 << 20) -> tuple[dict, dict]:
    """(snapshot, expected) of LlamaSdpaAttention as transformers 4.3x writes it: ``forward`` calls
    ``repeat_kv`` for K and V, then F.scaled_dot_product_attention (C++ frames down to
    at::native::_efficient_attention_forward); backward runs ScaledDotProductEfficientAttentionBackward0,
    which then releases the output it saved. No score matrix anywhere (the kernel is fused)."""
    fwd_line = [py(HF, 649, "forward")] + OUTER
    sdpa = [cpp("at::native::_efficient_attention_forward(at::Tensor const&, at::Tensor const&)"),
            cpp("at::_ops::_efficient_attention_forward::call(at::Tensor const&, at::Tensor const&)"),
            cpp("at::_ops::_scaled_dot_product_efficient_attention::call(at::Tensor const&, at::Tensor const&)"),
            cpp("at::_ops::scaled_dot_product_attention::call(at::Tensor const&, at::Tensor const&)")]
    bwd = [cpp("at::native::_efficient_attention_backward(at::Tensor const&, at::Tensor const&)"),
           cpp("at::_ops::_scaled_dot_product_efficient_attention_backward::call(at::Tensor const&)")]
    h = History()
    outs = []
    for _ in range(layers):
        kv = [h.alloc(qkv, GATHER + ops("clone", "reshape") + [py(HF, 176, "repeat_kv")] + fwd_line) for _ in "kv"]
        out = h.alloc(qkv, GATHER + sdpa + fwd_line)
        h.alloc(qkv, GATHER + ops("mm", "matmul", "linear") + [py(f"{TORCH}/nn/modules/linear.py", 125, "forward")]
                + MODULE + fwd_line)  # o_proj: the module's own
        h.alloc(qkv, GATHER + ops("add_Tensor") + OUTER[2:])  # the decoder layer's residual add, between calls
        outs.append((kv, out))
    for kv, out in reversed(outs):
        grads = [h.alloc(qkv, GATHER + bwd + node("ScaledDotProductEfficientAttentionBackward0")[len(GATHER):])
                 for _ in "qkv"]
        h.free(out, release("ScaledDotProductEfficientAttentionBackward0"))
        for blk in (*kv, *grads):
            h.free(blk)
    return framed_snapshot([h]), {"layer": "modeling_llama.py:649 forward (scaled_dot_product_attention)",
                                  "calls": layers, "fwd_bytes": 3 * qkv * layers, "bwd_bytes": 3 * qkv * layers,
                                  "module_fwd_bytes": qkv * layers}  # o_proj, in LlamaAttention.forward


# karpathy/nanoGPT model.py, as the code corpus stores it (a copy at commit 0011cd44 with RMSNorm and
# Softermax options): every function is ``forward`` in model.py. Lines of that copy: RMSNorm.forward
# 37-38; CausalSelfAttention.forward 89 (c_attn), 100 (q @ k^T * 1/sqrt(d)), 101 (masked_fill), 105
# (F.softmax), 106 (attn_dropout), 107 (att @ v), 108 (transpose().contiguous()), 111 (c_proj);
# MLP.forward 140-143; Block.forward 161 (x + self.attn(self.ln_1(x))), 162 (x + self.mlp(...));
# GPT.forward 244 (x = block(x)). torch/nn/modules/{linear,dropout,activation}.py forward,
# torch/nn/functional.py softmax / dropout (pytorch/pytorch).
NANO = "/home/u/nanoGPT/model.py"
NANO_ATTN = (85, 112)  # CausalSelfAttention.forward's lines in that copy (the test's walker uses them)
GPT_OUTER = [py(NANO, 244, "forward")] + MODULE + [py("/home/u/nanoGPT/train.py", 299, "<module>")]


def _nano_block(line):
    return [py(NANO, line, "forward")] + MODULE + GPT_OUTER


def _nano(line, caller):
    """A frame of a forward in model.py at ``line``, called (through nn.Module) from Block.forward:``caller``."""
    return [py(NANO, line, "forward")] + MODULE + _nano_block(caller)


def _linear(caller_frames):
    return GATHER + ops("mm", "matmul", "linear") + [py(f"{TORCH}/nn/modules/linear.py", 125, "forward")] + MODULE + \
        caller_frames


def _dropout(caller_frames):
    return GATHER + ops("native_dropout", "dropout") + [py(f"{TORCH}/nn/functional.py", 1425, "dropout"),
                                                        py(f"{TORCH}/nn/modules/dropout.py", 70, "forward")] + \
        MODULE + caller_frames


def nanogpt_training(layers=3, b=8, h=12, t=1024, hs=64, itemsize=2, backward=True, compiled_backward=False):
    """(snapshot, expected) of nanoGPT's manual attention path in training, recorded with
    stacks="all": per layer ln_1 (RMSNorm, a forward in model.py called from the same line as the
    attention), c_attn, QK^T (matmul copies its transposed operands), the scale, the mask's eq and
    masked_fill, F.softmax, attn_dropout (output and mask), AV, the head merge copy, c_proj,
    resid_dropout, then the MLP; the backward through autograd nodes in reverse (the softmax,
    dropout and mask nodes free what they saved). No frame says "attention"."""
    score = b * h * t * t * itemsize
    x = b * t * h * hs * itemsize
    hist = History()
    saved = []
    for _ in range(layers):
        norm = [hist.alloc(b * t * itemsize, GATHER + ops("linalg_vector_norm") + _nano(37, 161)),
                hist.alloc(x, GATHER + ops("div_Tensor") + _nano(38, 161)),
                hist.alloc(x, GATHER + ops("mul_Tensor") + _nano(38, 161))]
        qkv = hist.alloc(3 * x, _linear(_nano(89, 161)))
        qc = hist.alloc(x, GATHER + ops("clone", "reshape", "matmul") + _nano(100, 161))
        kc = hist.alloc(x, GATHER + ops("clone", "reshape", "matmul") + _nano(100, 161))
        qk = hist.alloc(score, GATHER + ops("bmm", "matmul") + _nano(100, 161))
        scaled = hist.alloc(score, GATHER + ops("mul_Tensor") + _nano(100, 161))
        hist.free(qk)
        eq = hist.alloc(t * t, GATHER + ops("eq_Scalar") + _nano(101, 161))
        masked = hist.alloc(score, GATHER + ops("masked_fill_Scalar") + _nano(101, 161))
        hist.free(scaled)
        soft = hist.alloc(score, GATHER + ops("_softmax", "softmax_int") +
                          [py(f"{TORCH}/nn/functional.py", 2140, "softmax")] + _nano(105, 161))
        hist.free(masked)
        drop = hist.alloc(score, _dropout(_nano(106, 161)))
        dmask = hist.alloc(score // itemsize, _dropout(_nano(106, 161)))  # the bool keep-mask
        vc = hist.alloc(x, GATHER + ops("clone", "reshape", "matmul") + _nano(107, 161))
        av = hist.alloc(x, GATHER + ops("bmm", "matmul") + _nano(107, 161))
        merged = hist.alloc(x, GATHER + ops("clone", "contiguous") + _nano(108, 161))
        proj = hist.alloc(x, _linear(_nano(111, 161)))
        rdrop = [hist.alloc(x, _dropout(_nano(111, 161))), hist.alloc(x // itemsize, _dropout(_nano(111, 161)))]
        res = hist.alloc(x, GATHER + ops("add_Tensor") + _nano_block(161))
        mlp = [hist.alloc(x, GATHER + ops("div_Tensor") + _nano(38, 162)),
               hist.alloc(4 * x, _linear(_nano(140, 162))),
               hist.alloc(4 * x, GATHER + ops("relu") + [py(f"{TORCH}/nn/modules/activation.py", 133, "forward")] +
                          MODULE + _nano(141, 162)),
               hist.alloc(x, _linear(_nano(142, 162))),
               hist.alloc(x, GATHER + ops("add_Tensor") + _nano_block(162))]
        if not backward:
            for blk in (*norm, qkv, qc, kc, eq, soft, drop, dmask, vc, av, merged, proj, *rdrop, res, *mlp):
                hist.free(blk)
            continue
        saved.append({"norm": norm, "qkv": qkv, "qc": qc, "kc": kc, "eq": eq, "soft": soft, "drop": drop,
                      "dmask": dmask, "vc": vc, "av": av, "merged": merged, "proj": proj, "rdrop": rdrop, "res": res,
                      "mlp": mlp})
    if backward:
        for s in reversed(saved):
            if compiled_backward:
                _compiled_nano_backward(hist, s, score, x)
                continue
            g_mlp = [hist.alloc(4 * x, node("MmBackward0", "mm")), hist.alloc(x, node("MmBackward0", "mm"))]
            g_proj = hist.alloc(x, node("MmBackward0", "mm"))
            g_att = hist.alloc(score, node("BmmBackward0", "bmm"))  # dP
            g_v = hist.alloc(x, node("BmmBackward0", "bmm"))
            g_drop = hist.alloc(score, node("NativeDropoutBackward0", "native_dropout_backward"))
            hist.free(s["dmask"], release("NativeDropoutBackward0"))
            g_soft = hist.alloc(score, node("SoftmaxBackward0", "_softmax_backward_data"))
            hist.free(s["soft"], release("SoftmaxBackward0"))
            g_mask = hist.alloc(score, node("MaskedFillBackward0", "masked_fill_Scalar"))
            hist.free(s["eq"], release("MaskedFillBackward0"))
            g_scale = hist.alloc(score, node("MulBackward0", "mul_Tensor"))
            g_q = hist.alloc(x, node("BmmBackward0", "bmm"))
            g_k = hist.alloc(x, node("BmmBackward0", "bmm"))
            g_qkv = hist.alloc(3 * x, node("MmBackward0", "mm"))
            for blk in (*g_mlp, g_proj, g_att, g_v, g_drop, g_soft, g_mask, g_scale, g_q, g_k, g_qkv):
                hist.free(blk)
            for k in ("norm", "rdrop", "mlp"):
                for blk in s[k]:
                    hist.free(blk)
            for k in ("qkv", "qc", "kc", "drop", "vc", "av", "merged", "proj", "res"):
                hist.free(s[k])
    return framed_snapshot([hist]), {"layers": layers, "score": score, "x": x, "file": NANO, "lines": NANO_ATTN}


# AOTAutograd's compiled backward: CompiledFunction.backward -> _backward_impl ->
# call_func_at_runtime_with_args -> the Inductor module's ``call`` (pytorch/pytorch
# torch/_functorch/_aot_autograd/runtime_wrappers.py and utils.py; /tmp/torchinductor_<user>/<2 chars>/c<hash>.py
# is where Inductor writes its output code). The record carries the forward's source lines under
# the Inductor frame, as the snapshots did.
RUNTIME = f"{TORCH}/_functorch/_aot_autograd/runtime_wrappers.py"
COMPILED_BWD = [py(f"{TORCH}/_functorch/_aot_autograd/utils.py", 126, "call_func_at_runtime_with_args"),
                py(RUNTIME, 2253, "_backward_impl"), py(RUNTIME, 2112, "backward"),
                py(f"{TORCH}/autograd/function.py", 307, "apply")]
INDUCTOR = "/tmp/torchinductor_u/q7/cq7xkzbn3lmyfz2ybqgxqgzjwmhygc3e4v5i2tnzn4d7rmm6kdmf.py"


def _compiled_nano_backward(hist, s, score, x):
    def at(line, out=161):
        return [py(INDUCTOR, 900 + line, "call")] + _nano(line, out) + COMPILED_BWD
    g = [hist.alloc(4 * x, [py(INDUCTOR, 1040, "call")] + _nano(140, 162) + COMPILED_BWD)]
    g += [hist.alloc(score, at(107)), hist.alloc(score, at(105)), hist.alloc(score, at(101)),
          hist.alloc(x, at(100)), hist.alloc(x, at(100)), hist.alloc(3 * x, at(89))]
    for blk in g:
        hist.free(blk)
    for k in ("norm", "rdrop", "mlp"):
        for blk in s[k]:
            hist.free(blk)
    for k in ("qkv", "qc", "kc", "eq", "soft", "drop", "dmask", "vc", "av", "merged", "proj", "res"):
        hist.free(s[k])


def llama_compiled_backward(layers=2, b=2, hq=8, lq=512, d=64, itemsize=2) -> tuple[dict, dict]:
    """(snapshot, expected): eager LlamaAttention forward (eager_attention_forward: QK^T at its line
    182, the softmax at 187, AV at 189), backward compiled: its allocations are Inductor's ``call``
    under ``_backward_impl``, with the forward's source frames (eager_attention_forward at the line
    each gradient differentiates, LlamaAttention.forward) in the stack; AV's gradient first."""
    score = b * hq * lq * lq * itemsize
    qkv = b * hq * lq * d * itemsize
    fn = lambda line: [py(HF, line, "eager_attention_forward"), py(HF, 262, "forward")]
    h = History()
    kept = []
    for _ in range(layers):
        q = h.alloc(qkv, _linear(ATTN_FN[1:]))
        qk = h.alloc(score, GATHER + ops("bmm", "matmul") + fn(182) + OUTER)
        soft = h.alloc(score, GATHER + ops("_softmax", "softmax_int") + [py(f"{TORCH}/nn/functional.py", 2140,
                                                                           "softmax")] + fn(187) + OUTER)
        out = h.alloc(qkv, GATHER + ops("bmm", "matmul") + fn(189) + OUTER)
        h.free(qk)
        mlp = h.alloc(4 * qkv, _linear(OUTER))
        kept.append((q, soft, out, mlp))
    for n, (q, soft, out, mlp) in enumerate(reversed(kept)):
        base = 400 + 30 * n  # Inductor's code is one straight function: every layer has its own lines
        g = [h.alloc(score, [py(INDUCTOR, base, "call")] + fn(189) + COMPILED_BWD),
             h.alloc(qkv, [py(INDUCTOR, base + 2, "call")] + fn(189) + COMPILED_BWD),
             h.alloc(score, [py(INDUCTOR, base + 5, "call")] + fn(187) + COMPILED_BWD),
             h.alloc(qkv, [py(INDUCTOR, base + 9, "call")] + fn(182) + COMPILED_BWD),
             h.alloc(qkv, [py(INDUCTOR, base + 11, "call")] + fn(182) + COMPILED_BWD)]
        for blk in (*g, q, soft, out, mlp):
            h.free(blk)
    return framed_snapshot([h]), {"layers": layers, "layer": "modeling_llama.py:eager_attention_forward"}


# transformers 4.38 modeling_llama.py LlamaSdpaAttention.forward (huggingface/transformers; line
# numbers as in that release, approximately): q/k/v_proj 652-654, self.rotary_emb 660
# (LlamaRotaryEmbedding.forward), apply_rotary_pos_emb 661 (its rotate_half: torch.cat), repeat_kv
# 663-664, F.scaled_dot_product_attention 678 (at::_ops::_scaled_dot_product_efficient_attention:
# the output and the float32 logsumexp), transpose().contiguous() 688, o_proj 691. LoRA on q_proj and
# v_proj as peft wraps them: peft/tuners/lora/layer.py Linear.forward (base_layer, lora_A, lora_B).
SDPA_LINES = (640, 700)  # LlamaSdpaAttention.forward's lines (the test's walker uses them)
PEFT = "/opt/conda/lib/python3.11/site-packages/peft/tuners/lora/layer.py"


def llama_sdpa_gqa_lora_training(layers=4, b=4, hq=32, hkv=8, l=2048, d=128, r=16, itemsize=2):
    """(snapshot, expected) of a memory-efficient-SDPA llama with GQA through repeat_kv and LoRA on
    q_proj / v_proj, training, recorded with stacks="all". Every block the attention module makes
    in the forward is kept for the backward; the backward runs through autograd nodes."""
    q_bytes = b * l * hq * d * itemsize
    kv_bytes = b * l * hkv * d * itemsize
    lse = -(-(b * hq * l * 4) // 512) * 512  # logsumexp, float32
    at = lambda line: [py(HF, line, "forward")] + OUTER  # LlamaSdpaAttention.forward
    sdpa = [cpp("at::native::_efficient_attention_forward(at::Tensor const&, at::Tensor const&)"),
            cpp("at::_ops::_efficient_attention_forward::call(at::Tensor const&, at::Tensor const&)"),
            cpp("at::_ops::_scaled_dot_product_efficient_attention::call(at::Tensor const&, at::Tensor const&)"),
            cpp("at::_ops::scaled_dot_product_attention::call(at::Tensor const&, at::Tensor const&)")]

    def proj(line, size, lora):
        if not lora:
            return [h.alloc(size, _linear(at(line)))]
        peft = lambda ln: [py(PEFT, ln, "forward")] + MODULE + at(line)
        return [h.alloc(size, _linear(peft(497))), h.alloc(b * l * r * itemsize, _linear(peft(505))),
                h.alloc(size, _linear(peft(505))), h.alloc(size, GATHER + ops("add_Tensor") + peft(505))]

    h = History()
    kept = []
    for _ in range(layers):
        blocks = proj(652, q_bytes, True) + proj(653, kv_bytes, False) + proj(654, kv_bytes, True)
        blocks += [h.alloc(b * l * d * 4, GATHER + ops("cos") + [py(HF, 128, "forward")] + MODULE + at(660)),
                   h.alloc(b * l * d * 4, GATHER + ops("sin") + [py(HF, 129, "forward")] + MODULE + at(660))]
        for size in (q_bytes, kv_bytes):  # q_embed / k_embed: (x * cos) + (rotate_half(x) * sin)
            blocks += [h.alloc(size, GATHER + ops("mul_Tensor") + [py(HF, 226, "apply_rotary_pos_emb")] + at(661)),
                       h.alloc(size, GATHER + ops("cat") + [py(HF, 211, "rotate_half"),
                                                              py(HF, 226, "apply_rotary_pos_emb")] + at(661)),
                       h.alloc(size, GATHER + ops("add_Tensor") + [py(HF, 226, "apply_rotary_pos_emb")] + at(661))]
        blocks += [h.alloc(q_bytes, GATHER + ops("clone", "reshape") + [py(HF, 176, "repeat_kv")] + at(ln))
                   for ln in (663, 664)]
        blocks += [h.alloc(q_bytes, GATHER + sdpa + at(678)), h.alloc(lse, GATHER + sdpa + at(678))]
        blocks += [h.alloc(q_bytes, GATHER + ops("clone", "contiguous") + at(688)),
                   h.alloc(q_bytes, _linear(at(691)))]
        resid = h.alloc(q_bytes, GATHER + ops("add_Tensor") + OUTER[2:])  # LlamaDecoderLayer.forward's residual
        kept.append((blocks, resid))
    bwd = [cpp("at::native::_efficient_attention_backward(at::Tensor const&, at::Tensor const&)"),
           cpp("at::_ops::_scaled_dot_product_efficient_attention_backward::call(at::Tensor const&)")]
    for blocks, resid in reversed(kept):
        g_o = h.alloc(q_bytes, node("MmBackward0", "mm"))
        grads = [h.alloc(q_bytes, GATHER + bwd + node("ScaledDotProductEfficientAttentionBackward0")[len(GATHER):])
                 for _ in "qkv"]
        for blk in (g_o, *grads, *blocks, resid):
            h.free(blk)
    return framed_snapshot([h]), {"layers": layers, "lines": SDPA_LINES, "file": HF,
                                  "layer": "modeling_llama.py:678 forward (scaled_dot_product_attention)"}


def course_mqa(calls=2, b=4, h=16, l=512, d=64, itemsize=2):
    """(snapshot, expected) of course code's multi-query attention (every function ``forward`` in
    model.py): q_proj to H heads, k_proj and v_proj to one head, K and V broadcast inside matmul
    (``q @ k.transpose(-2, -1)`` with k of one head), the scale, F.softmax, AV; stacks="all"."""
    mdl = "/home/u/course/model.py"
    outer = [py(mdl, 88, "forward")] + MODULE + [py("/home/u/course/train.py", 40, "train_step")]
    at = lambda line: [py(mdl, line, "forward")] + MODULE + outer
    score = b * h * l * l * itemsize
    hist = History()
    for _ in range(calls):
        q = hist.alloc(b * l * h * d * itemsize, _linear(at(31)))
        k = hist.alloc(b * l * d * itemsize, _linear(at(32)))
        v = hist.alloc(b * l * d * itemsize, _linear(at(33)))
        kx = hist.alloc(b * h * l * d * itemsize, GATHER + ops("clone", "reshape", "matmul") + at(36))
        s = hist.alloc(score, GATHER + ops("bmm", "matmul") + at(36))
        sc = hist.alloc(score, GATHER + ops("div_Tensor") + at(36))
        p = hist.alloc(score, GATHER + ops("_softmax", "softmax_int") + [py(f"{TORCH}/nn/functional.py", 2140,
                                                                           "softmax")] + at(37))
        o = hist.alloc(b * h * l * d * itemsize, GATHER + ops("bmm", "matmul") + at(38))
        out = hist.alloc(b * l * h * d * itemsize, _linear(at(40)))
        for blk in (q, k, v, kx, s, sc, p, o):
            hist.free(blk)
        mlp_outer = [py(mdl, 89, "forward")] + outer[1:]  # Block.forward's next line: x + self.mlp(x)
        hist.free(hist.alloc(4 * b * l * h * d * itemsize, _linear([py(mdl, 60, "forward")] + MODULE + mlp_outer)))
        hist.free(out)
    return framed_snapshot([hist]), {"calls": calls, "score": score}

"""Hugging Face transformers (tiny Llama built from a config, no download) and the training-loop
callbacks. Skipped when the optional package is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tb_attn_plugin  # noqa: E402
from tb_attn_plugin.report.build import analyze_file  # noqa: E402

LAYERS, HEADS, KV_HEADS, HIDDEN, SEQ, BATCH, ACTIVE = 2, 4, 2, 64, 32, 2, 2


def tiny_llama(impl: str):
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=LAYERS,
                                   num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=256,
                                   attn_implementation=impl)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


@pytest.mark.parametrize("impl,engine_impl", [("eager", "eager"), ("sdpa", "cpu_fused")])
def test_hf_llama_attention_tagged(tmp_path, impl, engine_impl):
    m = tiny_llama(impl)
    ids = torch.randint(0, 128, (BATCH, SEQ))
    with tb_attn_plugin.profile(tmp_path, model=m, variant=impl,
                                schedule=torch.profiler.schedule(wait=0, warmup=1, active=ACTIVE, repeat=1)) as prof:
        for _ in range(1 + ACTIVE):
            m(input_ids=ids, labels=ids).loss.backward()
            prof.step()
    report = analyze_file(prof.traces[0])
    assert report["calls"] == LAYERS * ACTIVE
    layers = {lay.layer: lay for lay in report["layers"]}
    assert sorted(layers) == [f"model.layers.{i}.self_attn" for i in range(LAYERS)]
    for lay in layers.values():
        assert lay.implementation == engine_impl
        s = lay.shape
        assert (s.batch, s.q_heads, s.kv_heads, s.q_len, s.head_dim) == (BATCH, HEADS, KV_HEADS, SEQ, HIDDEN // HEADS)
        assert any(st.pass_ == "bwd" and st.cpu_us > 0 for st in lay.stages)


def test_hf_trainer_callback(tmp_path):
    pytest.importorskip("accelerate")
    from tb_attn_plugin.collector.integrations.hf import TbAttnCallback

    m = tiny_llama("sdpa")
    data = [{"input_ids": torch.randint(0, 128, (SEQ,))} for _ in range(8)]
    for d in data:
        d["labels"] = d["input_ids"]
    args = transformers.TrainingArguments(str(tmp_path / "out"), per_device_train_batch_size=2, max_steps=4,
                                          report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no")
    cb = TbAttnCallback(str(tmp_path / "run"), wait=1, warmup=1, active=1)
    transformers.Trainer(model=m, args=args, train_dataset=data, callbacks=[cb]).train()
    traces = sorted((tmp_path / "run").glob("*.pt.trace.json.gz"))
    assert len(traces) == 1
    report = analyze_file(str(traces[0]))
    assert report["calls"] == LAYERS and report["metadata"]["variant"] == "sdpa"


def test_lightning_callback(tmp_path):
    L = pytest.importorskip("lightning.pytorch") if _has("lightning") else pytest.importorskip("pytorch_lightning")
    from tb_attn_plugin.collector.integrations.lightning import TbAttnLightningCallback
    from tests.cpu_models import B, D, model

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = model("sdpa")

        def training_step(self, batch, i):
            return self.net(batch).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    loader = torch.utils.data.DataLoader(torch.randn(8, 32, D), batch_size=B)
    cb = TbAttnLightningCallback(str(tmp_path / "run"), wait=1, warmup=1, active=1, variant="sdpa")
    L.Trainer(max_steps=4, callbacks=[cb], logger=False, enable_checkpointing=False, accelerator="cpu",
              enable_progress_bar=False).fit(Module(), loader)
    (trace,) = sorted((tmp_path / "run").glob("*.pt.trace.json.gz"))
    assert analyze_file(str(trace))["calls"] == 2


def _has(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None

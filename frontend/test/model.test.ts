import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { compareHeadline, compareModel } from "../src/compare_model";
import { kernelGroups } from "../src/kernels_model";
import { implementationBadges, implKind } from "../src/model";
import { defaultRun, defaultTarget, flattenRuns, skippedByReason, spanChoice } from "../src/runs_model";
import { dominantImplementation, logSlope, scalingModel, seriesKeyOf, timeFitCaveat, seqLenOf } from "../src/scaling_model";
import { layerDetail, stagesByLayer } from "../src/stages_model";
import { summaryModel } from "../src/summary_model";
import type { CompareDoc, RunsDoc } from "../src/route_types";
import type { Report } from "../src/types";

const fixture = <T>(name: string): T => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));
const bert = fixture<Report>("bert_flash");
const compiled = fixture<Report>("compile_small");
const negative = fixture<Report>("negative");
const cmp = fixture<CompareDoc>("compare_eager_flash");

/** A small eager training report with forward and backward, made by hand. */
function eagerReport(over: Partial<Report> = {}): Report {
  return {
    time_basis: "gpu", total_gpu_us: 1000, total_cpu_us: 3000, attention_gpu_us: 600, attention_cpu_us: 900,
    attention_share: 0.6, calls: 4,
    device: { name: "Test GPU", peak_tflops: 100 },
    steps: [{ step: 0 }, { step: 1 }, { step: -1 }],
    stages: [
      { stage: "softmax", pass: "fwd", gpu_us: 200, cpu_us: 10 },
      { stage: "qk_matmul", pass: "fwd", gpu_us: 100, cpu_us: 20 },
      { stage: "av_matmul", pass: "fwd", gpu_us: 100, cpu_us: 20 },
      { stage: "softmax", pass: "bwd", gpu_us: 200, cpu_us: 30 },
    ],
    layers: [
      { layer: "SelfAttention_10", layer_type: "SelfAttention", calls: 2, implementation: "eager", gpu_us: 300, cpu_us: 40,
        tflops: 5, score_bytes: 1048576, shape: { batch: 2, q_heads: 4, q_len: 128, k_len: 128, head_dim: 64 },
        stages: [{ stage: "softmax", pass: "fwd", gpu_us: 100 }, { stage: "qk_matmul", pass: "fwd", gpu_us: 50 },
          { stage: "softmax", pass: "bwd", gpu_us: 150 }] },
      { layer: "SelfAttention_2", layer_type: "SelfAttention", calls: 2, implementation: "eager", gpu_us: 300, cpu_us: 40,
        tflops: 10, score_bytes: 1048576, shape: { batch: 2, q_heads: 4, q_len: 256, k_len: 256, head_dim: 64 },
        stages: [{ stage: "softmax", pass: "fwd", gpu_us: 100 }, { stage: "av_matmul", pass: "fwd", gpu_us: 100 },
          { stage: "softmax", pass: "bwd", gpu_us: 50 }] },
    ],
    implementations: [{ layer_type: "SelfAttention", implementation: "eager", calls: 4 }],
    kernels: [
      { name: "void cunn_SoftMaxForward<8, float>(float*)", stage: "softmax", pass: "fwd", count: 4, gpu_us: 200 },
      { name: "void cutlass::Kernel2<cutlass_80_gemm_nn>(Params)", stage: "qk_matmul", pass: "fwd", count: 4, gpu_us: 100 },
      { name: "ampere_bf16_gemm_tn", stage: "av_matmul", pass: "fwd", count: 2, gpu_us: 60 },
      { name: "ampere_bf16_gemm_nn", stage: "av_matmul", pass: "fwd", count: 2, gpu_us: 40 },
      { name: "<img src=x onerror=alert(1)>", stage: "softmax", pass: "bwd", count: 4, gpu_us: 200 },
    ],
    call_samples: [{ id: 0, layer: "SelfAttention_2", implementation: "eager", dur_us: 50, events: [
      { name: "nn.Module: SelfAttention_2", kind: "op", stage: "other", start_us: 0, dur_us: 40, depth: 0 },
      { name: "aten::bmm", kind: "op", stage: "qk_matmul", start_us: 1, dur_us: 5, depth: 1 },
      { name: "gemm_a", kind: "kernel", stage: "qk_matmul", start_us: 10, dur_us: 10 },
      { name: "gemm_b", kind: "kernel", stage: "qk_matmul", start_us: 15, dur_us: 10 },
      { name: "softmax_k", kind: "kernel", stage: "softmax", start_us: 30, dur_us: 5 },
      { name: "gemm_a", kind: "kernel", stage: "av_matmul", start_us: 36, dur_us: 4 },
    ] }],
    verdicts: [{ id: "tflops", severity: "info", message: "x" }, { id: "eager_attention", severity: "warn", message: "y" }],
    ...over,
  };
}

describe("implementations", () => {
  it("classifies implementations into kinds", () => {
    expect(implKind("flash")).toBe("fused");
    expect(implKind("aotriton")).toBe("fused");
    expect(implKind("ck")).toBe("fused");
    expect(implKind("math")).toBe("math");
    expect(implKind("eager")).toBe("eager");
    expect(implKind("flash+math")).toBe("math");
    expect(implKind(undefined)).toBe("unknown");
    expect(implKind("somethingnew")).toBe("unknown");
  });
  it("makes one badge per layer type, compiled flagged", () => {
    const b = implementationBadges(compiled);
    expect(b).toHaveLength(1);
    expect(b[0]).toMatchObject({ layerType: "aotriton attention", implementation: "aotriton", kind: "fused", calls: 1, compiled: true });
    // Without the implementations list, badges come from the layers.
    const old = implementationBadges({ ...eagerReport(), implementations: undefined });
    expect(old).toEqual([{ layerType: "SelfAttention", implementation: "eager", kind: "eager", calls: 4, compiled: false }]);
  });
});

describe("summary", () => {
  it("matches the real BERT flash report", () => {
    const m = summaryModel(bert);
    expect(m.device).toBe("NVIDIA H100 80GB HBM3");
    expect(m.basis).toBe("gpu");
    expect(m.calls).toBe(4);
    expect(m.attentionUs).toBe(bert.attention_gpu_us);
    expect(m.totalUs).toBe(bert.total_gpu_us);
    expect(m.share).toBe(bert.attention_share);
    expect(m.steps).toBe(1);
    expect(m.badges.map((b) => b.implementation)).toEqual(["flash"]);
    expect(m.peakTflops).toBe(989);
    const lt = m.layerTypes[0];
    expect(lt.layerType).toBe("BertSdpaSelfAttention");
    expect(lt.calls).toBe(4);
    expect(lt.us).toBeCloseTo((bert.layers || []).reduce((s, l) => s + (l.gpu_us || 0), 0), 6);
    expect(lt.peakPct).toBeCloseTo((100 * (lt.tflops as number)) / 989, 6);
    expect(lt.shape).toBe("B=1 H=8 L=141 D=64");
    expect(m.empty).toBe(false);
  });
  it("puts warnings first and counts only real steps", () => {
    const m = summaryModel(eagerReport());
    expect(m.verdicts.map((v) => v.id)).toEqual(["eager_attention", "tflops"]);
    expect(m.steps).toBe(2);
    expect(m.layerTypes[0].scoreBytes).toBe(1048576);
    expect(m.stages.map((s) => `${s.pass}:${s.stage}`)).toEqual(["fwd:qk_matmul", "fwd:softmax", "fwd:av_matmul", "bwd:softmax"]);
    expect(m.stages.reduce((s, r) => s + r.share, 0)).toBeCloseTo(1, 9);
  });
  it("says when there is no attention, and survives a bare report", () => {
    expect(summaryModel(negative).empty).toBe(true);
    const bare = summaryModel({});
    expect(bare).toMatchObject({ calls: 0, attentionUs: 0, share: null, empty: true, basis: "gpu", steps: 0 });
    expect(summaryModel({ time_basis: "cpu" }).device).toMatch(/CPU only/);
  });
});

describe("stages by layer", () => {
  it("orders layers by their number, stacks stages in pipeline order", () => {
    const m = stagesByLayer(eagerReport(), "fwd", "gpu");
    expect(m.layers).toEqual(["SelfAttention_2", "SelfAttention_10"]);
    expect(m.series.map((s) => s.stage)).toEqual(["qk_matmul", "softmax", "av_matmul"]);
    expect(m.series.find((s) => s.stage === "softmax")!.values).toEqual([100, 100]);
    expect(m.totals).toEqual([200, 150]);
    const bwd = stagesByLayer(eagerReport(), "bwd", "gpu");
    expect(bwd.series.map((s) => s.stage)).toEqual(["softmax"]);
    expect(bwd.totals).toEqual([50, 150]);
  });
  it("sums to the layer totals of a real report", () => {
    const m = stagesByLayer(bert, "fwd", "gpu");
    expect(m.layers).toEqual(["BertSdpaSelfAttention_0", "BertSdpaSelfAttention_1", "BertSdpaSelfAttention_2", "BertSdpaSelfAttention_3"]);
    m.layers.forEach((name, i) => {
      const layer = bert.layers!.find((l) => l.layer === name)!;
      const want = layer.stages!.reduce((s, r) => s + (r.gpu_us || 0), 0);
      expect(m.totals[i]).toBeCloseTo(want, 2);
    });
  });
  it("opens a layer's kernels from its sampled call", () => {
    const d = layerDetail(eagerReport(), "SelfAttention_2")!;
    expect(d.sampleId).toBe(0);
    expect(d.kernels.map((k) => [k.name, k.stage, k.count, k.us])).toEqual([
      ["gemm_a", "qk_matmul", 1, 10], ["gemm_b", "qk_matmul", 1, 10], ["softmax_k", "softmax", 1, 5], ["gemm_a", "av_matmul", 1, 4],
    ]);
    expect(layerDetail(eagerReport(), "nope")).toBeNull();
    expect(layerDetail(eagerReport(), "SelfAttention_10")!.kernels).toEqual([]);
    expect(layerDetail(eagerReport(), "SelfAttention_2")!.kernelScope).toBe("sample");
  });

  it("prefers the layer's own kernels over all its calls", () => {
    const r = eagerReport();
    const lay = r.layers!.find((l) => l.layer === "SelfAttention_2")!;
    lay.kernels = [
      { name: "softmax_k", stage: "softmax", pass: "fwd", count: 2, gpu_us: 10 },
      { name: "gemm_a", stage: "qk_matmul", pass: "fwd", count: 2, gpu_us: 20 },
      { name: "<b>x</b>", stage: "softmax", pass: "bwd", count: 2, gpu_us: 7 },
    ];
    const d = layerDetail(r, "SelfAttention_2")!;
    expect(d.kernelScope).toBe("layer");
    expect(d.kernels.map((k) => [k.name, k.stage, k.pass, k.count, k.us])).toEqual([
      ["gemm_a", "qk_matmul", "fwd", 2, 20], ["softmax_k", "softmax", "fwd", 2, 10], ["<b>x</b>", "softmax", "bwd", 2, 7],
    ]);
  });
});

describe("kernels by stage", () => {
  it("groups by pass and stage with totals, means and shares", () => {
    const g = kernelGroups(eagerReport().kernels, { attentionUs: 600 });
    expect(g.map((x) => `${x.pass}:${x.stage}`)).toEqual(["fwd:qk_matmul", "fwd:softmax", "fwd:av_matmul", "bwd:softmax"]);
    const av = g[2];
    expect(av.total).toBe(100);
    expect(av.count).toBe(4);
    expect(av.share).toBeCloseTo(100 / 600, 9);
    expect(av.rows.map((r) => r.name)).toEqual(["ampere_bf16_gemm_tn", "ampere_bf16_gemm_nn"]);
    expect(av.rows[0].mean).toBe(30);
  });
  it("sorts and filters", () => {
    const byName = kernelGroups(eagerReport().kernels, { sort: "name" });
    expect(byName[2].rows.map((r) => r.name)).toEqual(["ampere_bf16_gemm_nn", "ampere_bf16_gemm_tn"]);
    const asc = kernelGroups(eagerReport().kernels, { sort: "total", desc: false });
    expect(asc[2].rows[0].total).toBe(40);
    const f = kernelGroups(eagerReport().kernels, { filter: "GEMM_TN" });
    expect(f).toHaveLength(1);
    expect(f[0].rows.map((r) => r.name)).toEqual(["ampere_bf16_gemm_tn"]);
    expect(kernelGroups(eagerReport().kernels, { filter: "softmax" }).map((x) => x.pass)).toEqual(["fwd", "bwd"]);
    expect(kernelGroups(eagerReport().kernels, { pass: "bwd" })[0].rows[0].name).toBe("<img src=x onerror=alert(1)>");
    expect(kernelGroups(undefined)).toEqual([]);
    expect(kernelGroups([{ name: "k" }])[0]).toMatchObject({ stage: "other", pass: "fwd", total: 0, share: null });
  });
  it("keeps every kernel of a real report", () => {
    const g = kernelGroups(bert.kernels, { attentionUs: bert.attention_gpu_us });
    const total = g.reduce((s, x) => s + x.total, 0);
    expect(total).toBeCloseTo(bert.kernels!.reduce((s, k) => s + (k.gpu_us || 0), 0), 2);
    expect(g.find((x) => x.stage === "fused")!.rows[0].name).toMatch(/flash_fwd_kernel/);
  });
});

describe("compare", () => {
  it("says what replaced what, in one line", () => {
    expect(compareHeadline(cmp, 1)).toBe(
      "flash: attention \u2212100% (GPU time): one fused flash kernel per call replaces QKᵀ matmul, scale & mask, softmax, AV matmul");
  });
  it("names each replaced stage once when forward and backward both changed", () => {
    const doc: CompareDoc = {
      runs: ["eager", "sdpa"], time_basis: "cpu",
      stages: ["softmax", "qk_matmul"].flatMap((stage) => (["fwd", "bwd"] as const).map((pass) => (
        { stage, pass, values: [10, 0], delta_us: -10, delta_pct: -100 }))),
      totals: [{ run: "eager", attention_cpu_us: 40, implementations: [{ implementation: "eager" }], calls: 2 },
        { run: "sdpa", attention_cpu_us: 20, implementations: [{ implementation: "cpu_fused" }], calls: 2 }],
    };
    expect(compareHeadline(doc, 1)).toBe("sdpa: attention \u221250% (CPU time): fused cpu_fused kernels replace QKᵀ matmul, softmax");
  });
  it("shapes the real compare answer", () => {
    const m = compareModel(cmp);
    expect(m.runs).toEqual(["eager", "flash"]);
    expect(m.basis).toBe("gpu");
    expect(m.stageRows[0]).toMatchObject({ stage: "softmax", delta: -262538.215, pct: -100 });
    for (let i = 1; i < m.stageRows.length; i++) expect(Math.abs(m.stageRows[i - 1].delta)).toBeGreaterThanOrEqual(Math.abs(m.stageRows[i].delta));
    expect(m.chart.categories[0]).toBe("QKV projection");
    expect(m.chart.series.map((s) => s.run)).toEqual(["eager", "flash"]);
    expect(m.onlyIn.find((o) => o.run === "flash")!.kernels.some((k) => /flash_fwd_kernel/.test(k.name))).toBe(true);
    expect(m.totals.map((t) => t.implementations)).toEqual([["eager"], ["flash"]]);
    expect(m.layerRows.map((l) => l.implementations)).toEqual([["eager", null], [null, "flash"]]);
  });
  it("explains an implementation change and a plain slowdown", () => {
    const doc: CompareDoc = {
      runs: ["a", "b"], time_basis: "gpu", stages: [{ stage: "fused", pass: "fwd", values: [10, 20], delta_us: 10, delta_pct: 100 }],
      totals: [{ run: "a", attention_gpu_us: 10, implementations: [{ implementation: "flash" }] },
        { run: "b", attention_gpu_us: 20, implementations: [{ implementation: "efficient" }] }],
    };
    expect(compareHeadline(doc, 1)).toBe("b: attention +100% (GPU time): implementation flash → efficient");
    doc.totals![1].implementations = [{ implementation: "flash" }];
    expect(compareHeadline(doc, 1)).toBe("b: attention +100% (GPU time); largest change: fused attention");
    expect(compareModel({ runs: ["a", "b"] })).toMatchObject({ headlines: [""], stageRows: [], layerRows: [], totals: [] });
  });
});

describe("scaling", () => {
  const at = (len: number, impl: string, us: number, score: number | null): Report => ({
    time_basis: "gpu", calls: 2, attention_gpu_us: us * 2, metadata: { seq_len: len, variant: impl },
    implementations: [{ implementation: impl, calls: 2 }], layers: [{ layer: "A_0", score_bytes: score, shape: { q_len: 999 } }],
  });
  it("puts runs on (length, time per call) per implementation and fits the growth", () => {
    const m = scalingModel([
      { run: "e1", report: at(512, "eager", 100, 4 * 512 * 512) },
      { run: "e2", report: at(1024, "eager", 400, 4 * 1024 * 1024) },
      { run: "e4", report: at(2048, "eager", 1600, 4 * 2048 * 2048) },
      { run: "f1", report: at(512, "flash", 10, null) },
      { run: "f2", report: at(1024, "flash", 20, null) },
      { run: "none", report: { calls: 0 } },
    ]);
    expect(m.distinctLengths).toBe(3);
    expect(m.series.map((s) => s.implementation)).toEqual(["eager", "flash"]);
    expect(m.series[0].points.map((p) => [p.seqLen, p.usPerCall])).toEqual([[512, 100], [1024, 400], [2048, 1600]]);
    expect(m.series[0].timeExponent).toBe(2);
    expect(m.series[0].memExponent).toBe(2);
    expect(m.series[1].timeExponent).toBe(1);
    expect(m.series[1].memExponent).toBeNull();
    expect(m.skipped).toEqual([{ run: "none", why: "no attention calls" }]);
  });
  // Reports as the engine writes them for the demo's runs and for a GPU trace (fields the model reads).
  const run = (len: number, over: Partial<Report>, perStep: number[]): Report => ({
    time_basis: "cpu", calls: 2 * perStep.length, attention_cpu_us: perStep.reduce((a, b) => a + b, 0) * 2,
    attention_gpu_us: 0, metadata: { seq_len: len, model: "TinyTransformer", device: "cpu", variant: "sdpa" },
    implementations: [{ implementation: "cpu_fused", calls: 2 * perStep.length }],
    layers: [{ layer: "model.blocks.0.attn", layer_type: "Attention", implementation: "cpu_fused", cpu_us: 1 }],
    steps: perStep.map((us, i) => ({ step: i, calls: 2, attention_cpu_us: 2 * us, cpu_us: 4 * us })),
    ...over,
  });
  it("keeps models, devices, time bases and compiled runs apart", () => {
    const owl: Report = { time_basis: "gpu", calls: 180, attention_gpu_us: 513120, attention_cpu_us: 67860,
      device: { name: "NVIDIA H100 80GB HBM3" }, implementations: [{ implementation: "eager", calls: 180 }],
      layers: [{ layer: "Owlv2Attention_0", layer_type: "Owlv2Attention", implementation: "eager", gpu_us: 513120, shape: { q_len: 5185 } }] };
    const compiledRun = (len: number) => run(len, {
      metadata: { seq_len: len, model: "TinyTransformer", device: "cpu", variant: "compiled" },
      layers: [{ layer: "model.blocks.0.attn", layer_type: "Attention", implementation: "cpu_fused", compiled: true, cpu_us: 1 }] }, [10, 10, 10]);
    const m = scalingModel([
      { run: "sdpa-L128", report: run(128, {}, [10, 10, 10]) },
      { run: "sdpa-L512", report: run(512, {}, [40, 40, 41]) },
      { run: "compiled-L128", report: compiledRun(128) },
      { run: "compiled-L512", report: compiledRun(512) },
      { run: "owlv2", report: owl },
    ]);
    expect(m.series.map((s) => s.label)).toEqual([
      "compiled (cpu_fused compiled) · TinyTransformer · CPU",
      "eager · Owlv2Attention · NVIDIA H100 80GB HBM3",
      "sdpa (cpu_fused) · TinyTransformer · CPU",
    ]);
    const gpu = m.series[1];
    expect(gpu.basis).toBe("gpu");
    expect(gpu.points[0].usPerCall).toBeCloseTo(2850.67, 1); // GPU time per call, not CPU op time (377 µs)
    expect(seriesKeyOf(owl).model).toBe("Owlv2Attention");
  });
  it("flags a time exponent fitted to too few lengths, single steps or noise", () => {
    const lens = [128, 256, 512];
    const quiet = scalingModel(lens.map((n) => ({ run: `L${n}`, report: run(n, {}, [n, n * 1.02, n * 0.99]) })));
    expect(quiet.series[0].timeExponent).toBe(1);
    expect(quiet.series[0].timeCaveat).toBeNull();
    const two = scalingModel(lens.slice(0, 2).map((n) => ({ run: `L${n}`, report: run(n, {}, [n, n, n]) })));
    expect(two.series[0].timeCaveat).toMatch(/^2 lengths only/);
    const single = scalingModel(lens.map((n) => ({ run: `L${n}`, report: run(n, {}, [n]) })));
    expect(single.series[0].timeCaveat).toMatch(/every run has one profiled step/);
    const noisy = scalingModel(lens.map((n) => ({ run: `L${n}`, report: run(n, {}, n === 256 ? [n, 3 * n, n] : [n, n, n]) })));
    expect(noisy.series[0].timeCaveat).toMatch(/^noisy: per-step time varies by \d+% of its median in L256/);
    const bent = scalingModel([[128, 100], [256, 10], [512, 1000]].map(([n, us]) => ({ run: `L${n}`, report: run(n, {}, [us, us, us]) })));
    expect(bent.series[0].timeCaveat).toMatch(/do not lie on a line/);
    expect(timeFitCaveat([], null)).toMatch(/^0 lengths only/);
  });
  it("takes the length from shapes when metadata has none", () => {
    expect(seqLenOf(bert)).toEqual({ value: 141, source: "shape" });
    expect(seqLenOf({ metadata: { seq_len: "2048" } })).toEqual({ value: 2048, source: "metadata" });
    expect(seqLenOf({})).toBeNull();
    expect(dominantImplementation(bert)).toBe("flash");
    expect(logSlope([[1, 1]])).toBeNull();
  });
});

describe("runs", () => {
  const doc: RunsDoc = {
    runs: [
      { run: "a", workers: [{ worker: "w0", spans: [{ span: "1", status: "ready", summary: { calls: 0, attention_gpu_us: 0 } }] }] },
      { run: "b", workers: [{ worker: "w0", spans: [{ span: "1", status: "ready", summary: { calls: 3, attention_gpu_us: 5 } },
        { span: "2", status: "loading" }] }, { worker: "w1", spans: [{ span: "1", status: "error", message: "bad" }] }] },
    ],
  };
  it("flattens and picks defaults", () => {
    expect(flattenRuns(doc).map((t) => `${t.run}/${t.worker}/${t.span}/${t.status}`)).toEqual([
      "a/w0/1/ready", "b/w0/1/ready", "b/w0/2/loading", "b/w1/1/error"]);
    expect(defaultRun(doc)).toBe("b");
    expect(defaultRun({ runs: [] })).toBeNull();
    expect(defaultTarget(doc, "b")).toEqual({ worker: "w0", span: "2" });
    expect(defaultTarget(doc, "zz")).toBeNull();
  });

  it("never opens a span that recorded nothing when an earlier one has steps", () => {
    const ready = (span: string, empty: boolean) => ({ span, status: "ready" as const, summary: { empty, calls: empty ? 0 : 2 } });
    const doc: RunsDoc = { runs: [{ run: "r", workers: [{ worker: "w", spans: [ready("1", false), ready("2", true)] }] }] };
    expect(defaultTarget(doc, "r")).toEqual({ worker: "w", span: "1" });
    doc.runs[0].workers[0].default_span = "1";
    expect(defaultTarget(doc, "r")).toEqual({ worker: "w", span: "1" });
    doc.runs[0].workers[0].spans = [ready("1", true)];
    doc.runs[0].workers[0].default_span = undefined;
    expect(defaultTarget(doc, "r")).toEqual({ worker: "w", span: "1" }); // all empty: the latest
  });
});

describe("skipped files", () => {
  it("groups the listing's skipped files by reason", () => {
    const doc: RunsDoc = { runs: [], skipped: [{ file: "a/x.json", reason: "r1" }, { file: "b.fifo.pt.trace.json", reason: "r2" },
      { file: "c/y.json.gz", reason: "r1" }] };
    expect(skippedByReason(doc)).toEqual([{ reason: "r1", files: ["a/x.json", "c/y.json.gz"] },
      { reason: "r2", files: ["b.fifo.pt.trace.json"] }]);
    expect(skippedByReason({ runs: [] })).toEqual([]);
  });
});

describe("span picker", () => {
  it("labels a span by its time, else by its file, and says in its tip how it was named", () => {
    const named = "worker from distributedInfo (rank 1 of 2); span from the trace's start time";
    expect(spanChoice({ span: "1796494434203339342", status: "ready", file: "job/bert_a.pt.trace.json.gz", named }))
      .toEqual({ label: "2026-12-05 18:13:54 UTC", tip: `job/bert_a.pt.trace.json.gz\n${named}\nspan 1796494434203339342` });
    expect(spanChoice({ span: "", status: "ready", file: "bert/bert.pt.trace.json.gz", named: "worker and span from the file name: x" }).label)
      .toBe("bert.pt.trace.json.gz");
    expect(spanChoice({ span: "", status: "ready" })).toEqual({ label: "(no span)", tip: "" });
  });
});

// Issue 47, item 1: a difference within the runs' noise is never headlined as a saving.

describe("compare headlines say noise first", () => {
  const doc = (verdict: "beyond_noise" | "within_noise" | "cannot_tell", differences: string[] = []) => ({
    runs: ["a", "b"], time_basis: "cpu" as const, differences,
    noise: { verdict, headline: verdict === "within_noise" ? "within noise" : verdict === "beyond_noise" ? "beyond noise"
      : "cannot tell whether this is noise", why: "", p_value: null },
    totals: [{ run: "a", attention_cpu_us: 109090, implementations: [] }, { run: "b", attention_cpu_us: 39150, implementations: [] }],
  });
  it("within noise before the percentage", () => {
    expect(compareHeadline(doc("within_noise"), 1)).toBe("b: within noise: attention −64% (CPU time)");
    expect(compareHeadline(doc("beyond_noise"), 1)).toBe("b: attention −64% (CPU time)");
  });
  it("other devices before anything", () => {
    const line = compareHeadline(doc("cannot_tell", ["different devices: a ran on NVIDIA H100, b on CPU"]), 1);
    expect(line.startsWith("different devices: a ran on NVIDIA H100, b on CPU; b: cannot tell whether this is noise: attention"))
      .toBe(true);
  });
});

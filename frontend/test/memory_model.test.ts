import { describe, expect, it } from "vitest";
import { attributionLine, layerStagesText, memoryModel, memoryScaling, overlayModel } from "../src/memory_model";
import type { MemorySection } from "../src/memory_types";
import type { Report } from "../src/types";

function section(over: Partial<MemorySection> = {}): MemorySection {
  return {
    version: 1, source: "profiler", device: "cpu", events: 6, peak_bytes: 3000,
    peak: { bytes: 3000, t_us: 2000, layer: "blocks.0.attn", stage: "softmax", pass: "fwd", attention_bytes: 2000,
      attention_share: 0.6667, score_matrix_bytes: 2000, before_record_bytes: 0, reserved_bytes: null,
      reserved_minus_allocated: null, live: [], explanation: "peak 2.9 KiB in the softmax of blocks.0.attn: ..." },
    score_matrix: { blocks: 2, bytes_total: 2000, bytes_per_call_max: 2000 },
    churn: { allocs: 3, frees: 3, bytes_allocated: 4000 },
    curve: { start_us: 100, t_us: [0, 1000, 2000, 3000], bytes: [1000, 2000, 3000, 0], reserved: [0, 0, 0, 0], points_total: 6 },
    spans: [{ call: 0, layer: "blocks.0.attn", stage: "qk_matmul", pass: "fwd", start_us: 500, end_us: 1500 },
      { call: 0, layer: "blocks.0.attn", stage: "softmax", pass: "bwd", start_us: 1500, end_us: 2500 },
      { call: 0, layer: "blocks.0.attn", stage: "softmax", pass: "fwd", start_us: 2500, end_us: 2500 }],
    layers: [{ layer: "b", calls: 1, bytes_allocated: 10, allocs: 1, peak_growth_bytes: 5, score_bytes: null, score_matrix_bytes_per_call: 0, score_matrix_blocks: 0 },
      { layer: "a", calls: 1, bytes_allocated: 10, allocs: 1, peak_growth_bytes: 50, score_bytes: 8, score_matrix_bytes_per_call: 8, score_matrix_blocks: 1 }],
    stages: [],
    ...over,
  };
}

describe("memoryModel", () => {
  it("draws the curve in ms, shades stages, drops empty spans, marks the peak", () => {
    const m = memoryModel(section());
    expect(m.points).toEqual([[0, 1000], [1, 2000], [2, 3000], [3, 0]]);
    expect(m.reserved).toBeNull(); // all zero: the CPU reserves nothing
    expect(m.bands.map((b) => [b.stage, b.pass, b.start, b.end])).toEqual([["qk_matmul", "fwd", 0.5, 1.5], ["softmax", "bwd", 1.5, 2.5]]);
    expect(m.bands[1].label).toBe("softmax (bwd) · blocks.0.attn");
    expect(m.peak).toEqual({ t: 2, bytes: 3000, explanation: expect.stringContaining("softmax") });
    expect(m.layers.map((l) => l.layer)).toEqual(["a", "b"]);
  });

  it("keeps reserved memory when the source records it", () => {
    const m = memoryModel(section({ curve: { start_us: 0, t_us: [0, 1], bytes: [1, 2], reserved: [4, 4], points_total: 2 } }));
    expect(m.reserved).toEqual([[0, 4], [0.001, 4]]);
  });
});

describe("overlay and scaling", () => {
  it("overlays runs that have memory and names those without", () => {
    const o = overlayModel([{ run: "eager", doc: { run: "eager", memory: section() } }, { run: "old", doc: { run: "old", memory: null } }]);
    expect(o.series.map((s) => [s.run, s.peak, s.scoreBytes])).toEqual([["eager", 3000, 2000]]);
    expect(o.missing).toEqual(["old"]);
  });

  it("fits the exponent of peak growth over sequence length per implementation", () => {
    const rep = (impl: string, L: number, growth: number): Report => ({
      calls: 2, metadata: { seq_len: L }, implementations: [{ implementation: impl, calls: 2 }],
      memory: section({ layers: [{ layer: "x", calls: 2, bytes_allocated: 1, allocs: 1, peak_growth_bytes: growth, score_bytes: null,
        score_matrix_bytes_per_call: 0, score_matrix_blocks: 0 }] }),
    } as Report);
    const m = memoryScaling([
      { run: "e1", report: rep("eager", 128, 128 * 128) }, { run: "e2", report: rep("eager", 512, 512 * 512) },
      { run: "f1", report: rep("cpu_fused", 128, 128 * 10) }, { run: "f2", report: rep("cpu_fused", 512, 512 * 10) },
      { run: "none", report: { calls: 1, metadata: { seq_len: 64 } } as Report },
    ]);
    expect(m.series.map((s) => [s.implementation, s.exponent])).toEqual([["cpu_fused", 1], ["eager", 2]]);
    expect(m.skipped).toEqual(["none"]);
  });
});

describe("snapshot attribution", () => {
  it("says unknown, never 0%, when nothing tells attention's blocks", () => {
    const mem = section({ source: "snapshot", attribution: { by: "unknown", reason: "attention: unknown (this snapshot has no annotations and no attention frames)" } });
    mem.peak!.attention_share = null;
    expect(attributionLine(mem)).toContain("attention: unknown");
    expect(attributionLine(mem)).not.toContain("0%");
  });
  it("names the sites, the device and what stays unattributed when frames tell", () => {
    const line = attributionLine(section({ source: "snapshot", attribution: { by: "frames", sites: ["model.py:scaled_dot_product_attention"],
      devices_with_attention: ["cuda:1"], unattributed_bwd_allocs: 3, unattributed_bwd_bytes: 3072, gqa_layers: [] },
    attention_peak: { bytes: 2048, t_us: 5, live_bytes: 4096, share: 0.5 } }))!;
    expect(line).toContain("model.py:scaled_dot_product_attention");
    expect(line).toContain("cuda:1");
    expect(line).toContain("3 backward allocations (3.0 KiB) unattributed");
    expect(line).toContain("50.0%");
    expect(attributionLine(section())).toBeNull();
  });
  it("lists a layer's stages, backward marked", () => {
    const text = layerStagesText({ layer: "a", calls: 1, bytes_allocated: 3072, allocs: 2, peak_growth_bytes: 0, score_bytes: null,
      score_matrix_bytes_per_call: 0, score_matrix_blocks: 0, stages: [
        { stage: "softmax", pass: "fwd", bytes_allocated: 2048, allocs: 1, score_matrix_blocks: 1 },
        { stage: "softmax", pass: "bwd", bytes_allocated: 1024, allocs: 1, score_matrix_blocks: 1 }] });
    expect(text).toMatch(/softmax.* 2\.0 KiB · .*\(bwd\) 1\.0 KiB/i);
  });
});

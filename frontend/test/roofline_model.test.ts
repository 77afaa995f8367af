import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { decompositionModel, PART_ORDER, rooflineChart, rooflineOf } from "../src/roofline_model";
import type { Report } from "../src/types";
import type { CompareDoc } from "../src/route_types";

const fixture = <T>(name: string): T => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));
const owl = fixture<Report>("roofline_owlv2");
const bert = fixture<Report>("roofline_bert_flash");
const cmp = fixture<CompareDoc>("roofline_compare");

describe("rooflineChart", () => {
  it("puts one point per layer type and length class under the H100 roof, named by its lengths", () => {
    const m = rooflineChart([{ run: "owl", report: owl }]);
    expect(m.points).toHaveLength(2); // OWLv2's vision calls (5185 tokens) and text calls (5 tokens)
    const p = m.points[0];
    expect(p.label).toBe("Owlv2Attention (eager, L 5185×5185)");
    expect(p.bound).toBe("memory");
    expect(m.points[1].label).toBe("Owlv2Attention (eager, L 5×5)");
    expect(m.points[1].bound).toBe("launch");
    expect(m.points[1].x).toBeLessThan(p.x);
    expect(m.roofs).toHaveLength(1);
    const roof = m.roofs[0];
    expect(roof.bandwidth).toBe(3.35);
    expect(roof.peak).toBe(989.5);
    expect(roof.ridge).toBeCloseTo(989.5 / 3.35, 6);
    // The polyline: slope = bandwidth up to the ridge, flat at the peak after it; the point lies under it.
    const [a, ridge, end] = roof.line;
    expect(a[1] / a[0]).toBeCloseTo(3.35, 9);
    expect(ridge).toEqual([roof.ridge, 989.5]);
    expect(end[1]).toBe(989.5);
    expect(p.y).toBeLessThanOrEqual(Math.min(roof.peak, p.x * roof.bandwidth));
    expect(m.xRange[0]).toBeLessThan(p.x);
    expect(m.xRange[1]).toBeGreaterThan(roof.ridge);
  });

  it("has a point per stage when asked, and labels runs when there are several", () => {
    const stages = rooflineChart([{ run: "owl", report: owl }], true);
    const rf = rooflineOf(owl);
    const positive = rf!.layers[0].stages.filter((s) => (s.achieved_tflops ?? 0) > 0 && (s.intensity ?? 0) > 0);
    const positiveText = rf!.layers[1].stages.filter((s) => (s.achieved_tflops ?? 0) > 0 && (s.intensity ?? 0) > 0);
    expect(stages.points).toHaveLength(positive.length + positiveText.length);
    expect(stages.points.map((p) => p.stage)).toContain("softmax");
    const both = rooflineChart([{ run: "owl", report: owl }, { run: "bert", report: bert }]);
    expect(both.roofs).toHaveLength(1); // both ran on an H100: one roof, named for both runs
    expect(both.roofs[0].runs).toEqual(["owl", "bert"]);
    expect(both.roofs[0].label).toBe("owl, bert: NVIDIA H100 SXM (datasheet): 989.5 TFLOP/s bf16, 3.35 TB/s");
    expect(both.points.map((p) => p.label)).toEqual(["owl: Owlv2Attention (eager, L 5185×5185)", "owl: Owlv2Attention (eager, L 5×5)",
      "bert: BertSdpaSelfAttention (flash)"]);
    expect(both.points[2].bound).toBe("launch");
  });

  it("says so when a report has no roofline or no roof", () => {
    const m = rooflineChart([{ run: "old", report: {} }]);
    expect(m.points).toEqual([]);
    expect(m.notes[0]).toContain("no roofline");
    const noRoof = { roofline: { ...rooflineOf(owl)!, roof: null } } as unknown as Report;
    const n = rooflineChart([{ run: "cpu", report: noRoof }]);
    expect(n.roofs).toEqual([]);
    expect(n.points).toHaveLength(2);
    expect(n.notes[0]).toContain("no peak or bandwidth");
  });
});

describe("decompositionModel", () => {
  it("rows in a fixed order that sum to the measured difference", () => {
    const d = decompositionModel(cmp)!;
    expect(d.rows.map((r) => r.part)).toEqual([...PART_ORDER]);
    expect(d.sumUs).toBeCloseTo(d.measuredUs, 3);
    expect(d.measuredUs).toBeLessThan(0);
    expect(d.sentence).toMatch(/^bert_flash saved .* score matrix/);
    expect(d.rows.find((r) => r.part === "memory")!.us).toBeLessThan(-400000);
  });

  it("names the launch part by what launches on the CPU", () => {
    const cpu = { ...cmp, decomposition: { ...(cmp as { decomposition: object }).decomposition, basis: "cpu" } } as CompareDoc;
    expect(decompositionModel(cpu)!.rows.find((r) => r.part === "launch")!.label).toBe("Op dispatch");
    expect(decompositionModel(cmp)!.rows.find((r) => r.part === "launch")!.label).toBe("Kernel launches");
  });

  it("is null without a decomposition", () => {
    expect(decompositionModel({ runs: ["a", "b"] })).toBeNull();
    expect(decompositionModel(null)).toBeNull();
  });
});

describe("labels", () => {
  it("falls back to layer type (implementation) for reports of an engine without labels", () => {
    const old = JSON.parse(JSON.stringify(owl)) as Report & { roofline: { layers: { label?: string }[] } };
    for (const l of old.roofline.layers) delete l.label;
    expect(rooflineChart([{ run: "o", report: old }]).points[0].label).toBe("Owlv2Attention (eager)");
  });
});

// Issue 47, item 2: the roof says when and how it was measured and how to re-measure; above it, no percent.
import { fractionText, roofNoteText } from "../src/roofline_model";

describe("a measured roof is dated and checked", () => {
  it("says when it was measured and the command that re-measures it", () => {
    const t = roofNoteText({ kind: "measured", device: "AMD EPYC", source: "measured on vm (AMD EPYC)", method: "best of 3 runs",
      measured_at: "2026-12-07T18:35:09Z", runs: 3, remeasure: "python -m tb_attn_plugin.collector.peaks --device cpu --out roof-cpu.json",
      tflops: { fp32: 0.017 }, bandwidth_tbs: 0.0048 });
    expect(t).toContain("measured 2026-12-07T18:35:09Z");
    expect(t).toContain("Re-measure: python -m tb_attn_plugin.collector.peaks --device cpu --out roof-cpu.json");
    const old = roofNoteText({ kind: "measured", device: "x", source: null, tflops: {}, bandwidth_tbs: 1 });
    expect(old).toContain("when measured: not recorded");
  });
  it("never prints a rate above the roof as a percent over 100", () => {
    expect(fractionText(8.0)).toBe("above the roof");
    expect(fractionText(0.63)).toBe("63%");
    expect(fractionText(0.004)).toBe("0.4%");
  });
});

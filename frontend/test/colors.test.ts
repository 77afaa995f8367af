import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  BOUND_COLOR, IMPL_COLORS, implColor, implLine, runColors, RUN_COLORS, seriesColors, seriesStyle, STAGE_COLOR, stageColor,
} from "../src/colors";
import { memoryScaling } from "../src/memory_model";
import type { MemorySection } from "../src/memory_types";
import { implKind } from "../src/model";
import { scalingModel, seriesKeyOf } from "../src/scaling_model";
import { stagesByLayer } from "../src/stages_model";
import { summaryModel } from "../src/summary_model";
import { backendColor } from "../src/sweep_model";
import type { Report } from "../src/types";

/** A CPU report of one layer whose implementation ran ``impl`` (compiled or not) at length L, with memory. */
function report(impl: string, L: number, compiled = false): Report {
  const growth = L * L;
  const memory = {
    layers: [{ layer: "blocks.0.attn", calls: 2, bytes_allocated: growth, allocs: 1, peak_growth_bytes: growth, score_bytes: null,
      score_matrix_bytes_per_call: 0, score_matrix_blocks: 0 }],
    peak_bytes: growth,
  } as unknown as MemorySection;
  return {
    time_basis: "cpu", calls: 2, attention_cpu_us: L, metadata: { seq_len: L }, implementations: [{ implementation: impl, calls: 2 }],
    layers: [{ layer: "blocks.0.attn", layer_type: "Attention", implementation: impl, compiled, calls: 2, cpu_us: L }],
    memory,
  } as unknown as Report;
}

describe("one colour map (colors.ts)", () => {
  it("gives an implementation and its compiled variant one colour, told apart by the stroke", () => {
    expect(implColor("cpu_fused compiled")).toBe(implColor("cpu_fused"));
    expect(implLine("cpu_fused compiled")).toBe("dashed");
    expect(implLine("cpu_fused")).toBe("solid");
    expect(implColor("compiled")).toBe(IMPL_COLORS.compiled); // the implementation named "compiled" is not a variant
    expect(implColor("my_custom_impl")).toBe(implColor("my_custom_impl compiled"));
    // and one badge: the Scaling page's list showed cpu_fused green and "cpu_fused compiled" grey (unknown)
    expect(implKind("cpu_fused compiled")).toBe(implKind("cpu_fused"));
    expect(implKind("math compiled")).toBe("math");
  });

  it("draws the Scaling page's three charts with one style per series", () => {
    // The demo's eager, SDPA and compiled runs at two lengths: the time and score charts (scalingModel)
    // and the memory chart (memoryScaling) must agree on every series' colour, stroke and marker.
    const items = [128, 256].flatMap((L) => [
      { run: `eager_${L}`, report: report("eager", L) },
      { run: `sdpa_${L}`, report: report("cpu_fused", L) },
      { run: `compiled_${L}`, report: report("cpu_fused", L, true) },
    ]);
    const groups = items.map(({ report: r }) => { const k = seriesKeyOf(r); return `${k.model} · ${k.device}`; });
    const time = new Map(scalingModel(items).series.map((s) => [s.label, seriesStyle(s.implementation, `${s.model} · ${s.device}`, groups)]));
    const mem = new Map(memoryScaling(items).series.map((s) => [s.label, seriesStyle(s.implementation, s.group, groups)]));
    expect([...mem.keys()].sort()).toEqual([...time.keys()].sort());
    expect(mem.size).toBe(3);
    for (const [label, style] of mem) expect(style).toEqual(time.get(label));
    const compiled = [...mem.entries()].find(([l]) => l.startsWith("cpu_fused compiled"))![1];
    const sdpa = [...mem.entries()].find(([l]) => l.startsWith("cpu_fused ·"))![1];
    expect(compiled.color).toBe(sdpa.color);
    expect([compiled.line, sdpa.line]).toEqual(["dashed", "solid"]);
  });

  it("colours a sweep's backends as the implementations they are on every other page", () => {
    for (const b of ["math", "flash", "efficient", "cudnn", "flex", "eager"]) {
      expect(backendColor(b, ["math", "flash", "pkg.mod:attn"])).toBe(implColor(b));
    }
    // A timed module is no implementation: a colour no implementation on the chart has, whatever the order.
    const names = ["math", "flash", "pkg.mod:attn", "other.mod:f"];
    const colors = seriesColors(names);
    expect(new Set(colors.values()).size).toBe(names.length);
    expect(seriesColors([...names].reverse())).toEqual(colors);
  });

  it("keeps a run's colour by its place among the page's runs, not among the runs a chart draws", () => {
    const c = runColors(["eager", "old_no_memory", "sdpa"]);
    expect(c.get("sdpa")).toBe(RUN_COLORS[2]); // the memory overlay leaves "old_no_memory" out; sdpa keeps its colour
    expect(runColors(["a", "b"]).get("b")).toBe(RUN_COLORS[1]);
  });

  it("has one colour per stage and per bound, and a stage outside the table is grey, not another stage's", () => {
    expect(new Set(Object.values(STAGE_COLOR)).size).toBe(Object.keys(STAGE_COLOR).length);
    expect(new Set(Object.values(BOUND_COLOR)).size).toBe(Object.keys(BOUND_COLOR).length);
    expect(Object.values(STAGE_COLOR)).not.toContain(stageColor("no_such_stage"));
  });

  it("is the only place a view takes a colour from", () => {
    // A colour literal in a view is a second colour map: style.ts (CSS) and colors.ts only.
    const dir = new URL("../src/", import.meta.url);
    const files = [...readdirSync(dir).map((f) => `${f}`), ...readdirSync(new URL("views/", dir)).map((f) => `views/${f}`)]
      .filter((f) => f.endsWith(".ts") && f !== "colors.ts" && f !== "style.ts");
    const found: string[] = [];
    for (const f of files) {
      const text = readFileSync(new URL(f, dir), "utf8");
      for (const m of text.matchAll(/\b(color|fill|background)\s*:\s*["'`]?#[0-9a-fA-F]{3,8}/g)) found.push(`${f}: ${m[0]}`);
    }
    expect(found).toEqual([]);
  });
});

describe("legends list what is drawn", () => {
  it("leaves out a stage that took no time (dropout with p=0)", () => {
    const r = {
      time_basis: "cpu", calls: 1, attention_cpu_us: 10,
      stages: [{ stage: "softmax", pass: "fwd", cpu_us: 6 }, { stage: "dropout", pass: "fwd", cpu_us: 0 }, { stage: "qk_matmul", pass: "fwd", cpu_us: 4 }],
      layers: [{ layer: "l0", calls: 1, cpu_us: 10, stages: [{ stage: "softmax", pass: "fwd", cpu_us: 6 }, { stage: "dropout", pass: "fwd", cpu_us: 0 },
        { stage: "qk_matmul", pass: "fwd", cpu_us: 4 }] }],
    } as unknown as Report;
    expect(summaryModel(r).stages.map((s) => s.stage)).toEqual(["qk_matmul", "softmax"]);
    expect(stagesByLayer(r, "fwd", "cpu").series.map((s) => s.stage)).toEqual(["qk_matmul", "softmax"]);
  });
});

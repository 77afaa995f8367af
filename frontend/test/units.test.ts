// Issue 27, item 8: units, sorting and legends (format.ts is the twin of tb_attn_plugin/format/units.py).
import { describe, expect, it } from "vitest";
import { fmtTbs, fmtTflops, naturalCompare, niceByteStep } from "../src/format";
import { memoryModel } from "../src/memory_model";
import type { MemorySection } from "../src/memory_types";
import { implColor } from "../src/colors";
import { timelineModel } from "../src/timeline_model";

describe("rates in their unit", () => {
  it("never shows a CPU's throughput as 0.0 TFLOP/s", () => {
    expect(fmtTflops(0.0217)).toBe("21.7 GFLOP/s");
    expect(fmtTflops(1.234)).toBe("1.23 TFLOP/s");
    expect(fmtTflops(0.0005)).toBe("500 MFLOP/s");
    expect(fmtTflops(null)).toBe("—");
  });
  it("writes GB/s values as GB/s", () => {
    expect(fmtTbs(0.000572)).toBe("572 MB/s");
    expect(fmtTbs(0.0365)).toBe("36.5 GB/s");
    expect(fmtTbs(3.35)).toBe("3.35 TB/s");
  });
});

describe("byte ticks", () => {
  it("steps in powers of two of a byte unit", () => {
    const mib = 1 << 20;
    const step = niceByteStep(14.3 * mib)!;
    expect(step).toBe(4 * mib); // ticks 4 / 8 / 12 MiB (ECharts' own: 4.8 / 9.5 / 14.3 MiB)
    expect(niceByteStep(0)).toBeUndefined();
  });
});

describe("natural order", () => {
  it("sorts layers._10 after layers._2", () => {
    expect(["l_10", "l_1", "l_0", "l_2"].sort(naturalCompare)).toEqual(["l_0", "l_1", "l_2", "l_10"]);
  });
  it("sorts memory layers of equal growth by their numbers", () => {
    const row = (layer: string) => ({ layer, calls: 1, peak_growth_bytes: 10, bytes_allocated: 10, allocs: 1, score_bytes: null,
      score_matrix_blocks: 0 });
    const mem = { layers: [row("blk_10"), row("blk_1"), row("blk_0")], curve: { t_us: [], bytes: [] }, spans: [], peak: null } as unknown as MemorySection;
    expect(memoryModel(mem).layers.map((l) => l.layer)).toEqual(["blk_0", "blk_1", "blk_10"]);
  });
});

describe("one colour per implementation", () => {
  it("is the same on every chart, and two fused implementations differ", () => {
    expect(implColor("flash")).toBe(implColor("flash"));
    expect(implColor("flash")).not.toBe(implColor("efficient"));
    expect(implColor("my_custom_impl")).toBe(implColor("my_custom_impl"));
  });
});

describe("the one-call timeline's legend", () => {
  it("names the wrapper op a call and leaves out stages that drew nothing", () => {
    const m = timelineModel({ id: 0, events: [
      { name: "aten::scaled_dot_product_attention", kind: "op", stage: "other", start_us: 0, dur_us: 30, depth: 0, thread: "1" },
      { name: "aten::_fused_sdp_choice", kind: "op", stage: "fused", start_us: 1, dur_us: 20, depth: 1, thread: "1" },
      { name: "aten::dropout", kind: "op", stage: "dropout", start_us: 25, dur_us: 0, depth: 1, thread: "1" },
      { name: "aten::copy_", kind: "op", stage: "other", start_us: 31, dur_us: 2, depth: 0, thread: "1" },
    ] });
    expect(m.stages).toEqual(["fused", "other", "call"]);
    expect(m.segments[0].items.map((i) => i.stage)).toEqual(["call", "fused", "dropout", "other"]);
  });
});

describe("the Summary's share of peak on a CPU", () => {
  it("uses the roofline's measured roof when the device has no data-sheet peak", async () => {
    const { summaryModel } = await import("../src/summary_model");
    const report = {
      calls: 2, layers: [{ layer: "l0", layer_type: "Attention", implementation: "eager", calls: 2, cpu_us: 10, gpu_us: 0, tflops: 0.0217, stages: [] }],
      attention_cpu_us: 10, total_cpu_us: 20, time_basis: "cpu", device: { name: "cpu" },
      roofline: { layers: [{ layer_type: "Attention", peak_tflops: 0.1958 }] },
    } as never;
    const lt = summaryModel(report).layerTypes[0];
    expect(lt.peakPct).toBeCloseTo((100 * 0.0217) / 0.1958, 6); // was null: "peak unknown" under a verdict quoting 11%
  });
});

// Issue 47, item 3: a time axis reads in one unit, its zero included.
import { usAxis } from "../src/format";

describe("time axes in one unit", () => {
  it("starts at a zero in the axis's unit, never 0.0 µs beside ms ticks", () => {
    const f = usAxis(171559.4);
    expect([0, 50000, 150000].map(f)).toEqual(["0 ms", "50 ms", "150 ms"]);
    expect(usAxis(2.5e6)(0)).toBe("0 s");
    expect(usAxis(350)(0)).toBe("0 µs");
    expect(usAxis(950)(1000)).toBe("1 ms"); // the chart's nice top above a 950 µs maximum
  });
});

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { callChoices, timelineModel } from "../src/timeline_model";
import type { CallSample, Report } from "../src/types";

const bert = JSON.parse(readFileSync(new URL("./fixtures/bert_flash.json", import.meta.url), "utf8")) as Report;

const call = (events: CallSample["events"], over: Partial<CallSample> = {}): CallSample => ({ id: 0, events, ...over });

describe("timeline lanes", () => {
  it("names CPU rows by nesting depth (and thread) and GPU rows by stream", () => {
    const m = timelineModel(call([
      { name: "nn.Module: SelfAttention_2", kind: "op", stage: "other", start_us: 0, dur_us: 40, depth: 0, thread: "11" },
      { name: "aten::bmm", kind: "op", stage: "qk_matmul", start_us: 1, dur_us: 5, depth: 1, thread: "11" },
      { name: "gemm_a", kind: "kernel", stage: "qk_matmul", start_us: 10, dur_us: 10, stream: "7" },
      { name: "gemm_b", kind: "kernel", stage: "qk_matmul", start_us: 15, dur_us: 10, stream: "13" },
      { name: "softmax_k", kind: "kernel", stage: "softmax", start_us: 30, dur_us: 5, stream: "7" },
    ]));
    expect(m.segments).toHaveLength(1);
    const seg = m.segments[0];
    expect(seg.lanes).toEqual(["depth 0 (thread 11)", "depth 1 (thread 11)", "GPU stream 7", "GPU stream 13"]);
    expect(seg.items.filter((i) => i.kind === "kernel").map((i) => [i.name, seg.lanes[i.lane]])).toEqual([
      ["gemm_a", "GPU stream 7"], ["softmax_k", "GPU stream 7"], ["gemm_b", "GPU stream 13"]]);
    expect(seg.span).toBe(40);
    expect(m.stages).toEqual(["qk_matmul", "softmax", "call"]); // the module holding the bmm is the call's wrapper, not "copies, layout"
    expect(seg.lanes.some((l) => /^CPU \d/.test(l))).toBe(false);
  });

  it("gives each thread its own rows, and packs overlapping kernels of one stream", () => {
    const m = timelineModel(call([
      { name: "a", kind: "op", start_us: 0, dur_us: 10, depth: 0, thread: "1" },
      { name: "b", kind: "op", start_us: 0, dur_us: 10, depth: 0, thread: "2" },
      { name: "k1", kind: "kernel", start_us: 0, dur_us: 10, stream: "7" },
      { name: "k2", kind: "kernel", start_us: 5, dur_us: 10, stream: "7" },
    ]));
    expect(m.segments[0].lanes).toEqual(["thread 1 · depth 0", "thread 2 · depth 0", "GPU stream 7 (1)", "GPU stream 7 (2)"]);
  });

  it("splits a call whose backward runs long after its forward", () => {
    const m = timelineModel(call([
      { name: "fwd op", kind: "op", pass: "fwd", start_us: 0, dur_us: 100, depth: 0 },
      { name: "bwd op", kind: "op", pass: "bwd", start_us: 50_000, dur_us: 300, depth: 0 },
      { name: "bwd k", kind: "kernel", pass: "bwd", start_us: 50_010, dur_us: 200 },
    ], { dur_us: 50_300 }));
    expect(m.segments.map((s) => [s.title, s.offset, s.span])).toEqual([["forward", 0, 100], ["backward", 50_000, 300]]);
    expect([m.gapUs, m.fwdUs, m.bwdUs]).toEqual([49_900, 100, 300]);
    expect(m.segments[1].items.map((i) => i.start)).toEqual([0, 10]);
  });

  it("keeps a call whole when its backward follows closely", () => {
    const m = timelineModel(call([
      { name: "f", kind: "op", pass: "fwd", start_us: 0, dur_us: 100, depth: 0 },
      { name: "b", kind: "op", pass: "bwd", start_us: 120, dur_us: 100, depth: 0 },
    ]));
    expect(m.segments.map((s) => s.title)).toEqual(["whole call"]);
    expect(m.gapUs).toBeNull();
    expect(timelineModel(null)).toEqual({ segments: [], stages: [], gapUs: null, fwdUs: null, bwdUs: null });
  });

  it("shapes a real call sample (reports without thread or stream fields)", () => {
    const s = bert.call_samples![0];
    const m = timelineModel(s);
    expect(m.segments.flatMap((g) => g.items)).toHaveLength(s.events!.length);
    expect(m.segments[0].lanes.at(-1)).toBe("GPU");
  });
});

describe("call pickers", () => {
  it("offers every step and the calls of the chosen one", () => {
    const samples = [{ id: 0, step: 3 }, { id: 1, step: 3 }, { id: 2, step: 4 }, { id: 3, step: 5 }];
    expect(callChoices(samples, 3)).toEqual({ steps: [3, 4, 5], calls: [samples[0], samples[1]] });
    expect(callChoices(samples, 5).calls.map((c) => c.id)).toEqual([3]);
  });
});

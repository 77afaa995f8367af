import { describe, expect, it } from "vitest";
import { heatColor, ranksModel } from "../src/ranks-model";
import type { RanksDoc } from "../src/route_types";

function doc(over: Partial<RanksDoc> = {}): RanksDoc {
  return {
    run: "job", time_basis: "gpu", world_size: 4, rank_count: 3, missing_ranks: [3], missing_count: 1,
    stages: ["qk_matmul", "softmax"],
    ranks: [
      { rank: 2, worker: "w2", attention_us: 300, stages: { qk_matmul: 100, softmax: 200 }, vs_median: 1.5 },
      { rank: 0, worker: "w0", attention_us: 200, stages: { qk_matmul: 50, softmax: 150 }, vs_median: 1.0 },
      { rank: 1, worker: "w1", attention_us: 190, stages: { qk_matmul: 40 }, vs_median: 0.95 },
    ],
    median_us: 200, slowest: { rank: 2, worker: "w2", attention_us: 300 }, imbalance: 1.5,
    odd_ranks: [{ rank: 1, worker: "w1", what: "backend", value: "math", usual: "flash" }],
    layers: [{ layer: "L0", ranks: 3, median_us: 10, min_us: 9, max_us: 15, spread: 1.5, slowest_rank: 2 }],
    headline: "slowest rank 2: attention 1.5× the median", ...over,
  };
}

describe("ranksModel", () => {
  it("sorts ranks, scales each stage column by its largest rank and marks the slowest", () => {
    const m = ranksModel(doc());
    expect(m.rows.map((r) => r.rank)).toEqual([0, 1, 2]);
    const slow = m.rows[2];
    expect(slow.slowest).toBe(true);
    expect(slow.cells.map((c) => c.intensity)).toEqual([1, 1]);
    expect(m.rows[0].cells.map((c) => c.intensity)).toEqual([0.5, 0.75]);
    expect(m.rows[1].cells[1]).toMatchObject({ stage: "softmax", us: 0, intensity: 0 });
    expect(m.rows[1].odd).toEqual(["backend math (others: flash)"]);
    expect(m.odd).toEqual(["rank 1 runs backend math where the others run flash"]);
    expect(m.missing).toEqual([3]);
  });

  it("pairs the rank nearest the median with the slowest for rank against rank", () => {
    expect(ranksModel(doc()).pair).toEqual(["w0", "w2"]);
    expect(ranksModel(doc({ ranks: [], slowest: undefined })).pair).toBeNull();
  });

  it("names the traces left out: a rank taken twice, or no rank", () => {
    const dups = [1, 2, 3, 4, 5, 6].map((i) => ({ rank: i, worker: `node1_rank${i}`, kept: `node0_rank${i}`, rank_from: "worker name" }));
    const m = ranksModel(doc({ duplicate_ranks: dups, duplicate_count: 6, unranked_workers: ["launcher"], unranked_count: 1 }));
    expect(m.leftOut).toEqual([
      "left out, their rank taken by another trace (6): node1_rank1 (rank 1, kept node0_rank1), node1_rank2 (rank 2, kept node0_rank2), "
        + "node1_rank3 (rank 3, kept node0_rank3), node1_rank4 (rank 4, kept node0_rank4), node1_rank5 (rank 5, kept node0_rank5) …"
        + "; worker names may carry a node's local rank",
      "without a rank, left out (1): launcher",
    ]);
    expect(ranksModel(doc()).leftOut).toEqual([]);
  });

  it("survives a document with fields missing", () => {
    const m = ranksModel({ run: "x" });
    expect(m.rows).toEqual([]);
    expect(m.imbalance).toBeNull();
    expect(m.basis).toBe("gpu");
  });
});

describe("heatColor", () => {
  it("goes from white to the stage colour", () => {
    expect(heatColor("#ff0000", 0)).toBe("rgb(255,255,255)");
    expect(heatColor("#ff0000", 1)).toBe("rgb(255,0,0)");
    expect(heatColor("#000000", 0.5)).toBe("rgb(128,128,128)");
    expect(heatColor("#000000", Number.NaN)).toBe("rgb(255,255,255)");
    expect(heatColor("bad", 2)).toBe("rgba(153,153,153,1.000)");
  });
});

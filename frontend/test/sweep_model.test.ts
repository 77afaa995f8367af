import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  backendColor, backendsOf, batchesOf, bestGrid, fmtSeconds, seriesLabel, sharedShape, skippedLines, statusCounts,
  sweepSeries,
} from "../src/sweep_model";
import type { SweepDoc } from "../src/route_types";
import { mergeHash, parseHash, stateFromParams, stateToParams } from "../src/state";
import { splitSweepRuns, sweepOfRun } from "../src/sweep_runs";
import { defaultRun } from "../src/runs_model";

// A real /sweep answer: tests/sweep_data.py's CPU sweep (math, flash, eager; efficient unsupported;
// math and eager out of memory under a 48 MiB cap), served by tb_attn_plugin/plugin/sweeps.py.
const doc: SweepDoc = JSON.parse(readFileSync(new URL("./fixtures/sweep_cpu.json", import.meta.url), "utf8"));

describe("sweep model", () => {
  it("lists backends, batches and the shared shape", () => {
    expect(backendsOf(doc)).toEqual(["eager", "efficient", "flash", "math"]);
    expect(batchesOf(doc)).toEqual([1, 4]);
    const shape = Object.fromEntries(sharedShape(doc));
    expect(shape).toMatchObject({ device: "cpu", dtype: "float32", heads: "2", "head dim": "16", pass: "fwd" });
    // what the cells ran on, from the records
    expect(shape.on).toBe(doc.cells[0].device_name);
    expect(shape.on).toMatch(/\S/);
    expect(shape.torch).toBe(doc.cells[0].torch_version);
    expect(statusCounts(doc).map(([k]) => k)).toEqual(["ok", "oom", "unsupported"]);
  });

  it("makes one time series per backend that ran, with its fitted exponent and OOM length", () => {
    const time = sweepSeries(doc, 1, "time");
    expect(time.map((s) => s.backend)).toEqual(["eager", "flash", "math"]); // efficient never ran
    const math = time.find((s) => s.backend === "math")!;
    const cells = doc.cells.filter((c) => c.backend === "math" && c.batch === 1 && c.status === "ok");
    expect(math.points.map((p) => p.seqLen)).toEqual(cells.map((c) => c.seq_len).sort((a, b) => a - b));
    expect(math.points.map((p) => p.value)).toEqual([...cells].sort((a, b) => a.seq_len - b.seq_len).map((c) => c.median_s));
    const fit = doc.analysis.fits.find((f) => f.backend === "math" && f.batch === 1)!;
    expect(math.exponent).toBe(fit.time_exponent);
    expect(seriesLabel(math)).toBe(`math · L^${fit.time_exponent!.toFixed(2)}`);
    expect(math.oomAt).toBe(doc.analysis.oom_boundary.find((o) => o.backend === "math" && o.batch === 1)!.min_oom_seq_len);
    expect(time.find((s) => s.backend === "flash")!.oomAt).toBeNull();
  });

  it("flags a time exponent fitted to noisy cells (IQR above 10% of a median), never a memory one", () => {
    const noisy: SweepDoc = JSON.parse(JSON.stringify(doc));
    for (const f of noisy.analysis.fits) f.max_iqr_fraction = f.backend === "math" ? 0.24 : 0.03;
    const time = sweepSeries(noisy, 1, "time");
    expect(time.find((s) => s.backend === "math")!.noisy).toBe(0.24);
    expect(time.find((s) => s.backend === "flash")!.noisy).toBeNull();
    expect(sweepSeries(noisy, 1, "memory").every((s) => s.noisy === null)).toBe(true);
    expect(sweepSeries(doc, 1, "time").every((s) => s.noisy === null)).toBe(true); // a sweep from before the field
  });

  it("memory series: the score matrix grows about as L^2, flash's memory far slower", () => {
    const mem = sweepSeries(doc, 4, "memory");
    const math = mem.find((s) => s.backend === "math")!;
    const flash = mem.find((s) => s.backend === "flash")!;
    expect(math.exponent!).toBeGreaterThan(1.6);
    expect(flash.exponent!).toBeLessThan(math.exponent!);
  });

  it("grid: the best backend per (batch, seq_len), and why a cell has none", () => {
    const g = bestGrid(doc);
    expect(g.seqLens).toEqual([64, 128, 256, 512, 1024, 2048]);
    for (const b of g.batches) for (const l of g.seqLens) {
      const ok = doc.cells.filter((c) => c.batch === b && c.seq_len === l && c.status === "ok");
      const cell = g.cell(b, l);
      if (!ok.length) {
        expect(cell.best?.backend ?? null).toBeNull();
        expect(cell.none).toMatch(/oom|unsupported/);
        continue;
      }
      const fastest = ok.reduce((a, c) => (c.median_s! < a.median_s! ? c : a));
      expect(cell.best!.backend).toBe(fastest.backend);
    }
    expect(g.cell(99, 64)).toEqual({ best: null, none: "not measured" });
  });

  it("colours: fixed for the known backends, stable for others", () => {
    expect(backendColor("flash", [])).toBe(backendColor("flash", ["x"]));
    expect(backendColor("pkg.mod:f", ["pkg.mod:f", "math"])).toBe(backendColor("pkg.mod:f", ["math", "pkg.mod:f"]));
    expect(fmtSeconds(0.0015)).toBe("1.50 ms");
    expect(fmtSeconds(null)).toBe("—");
  });
});

describe("sweep state in the URL", () => {
  it("keeps the view and the sweep run, names with slashes and spaces included", () => {
    const s = stateFromParams([["attn_view", "sweep"], ["attn_sweep", "runs/my sweep"]]);
    expect(s.view).toBe("sweep");
    expect(s.sweep).toBe("runs/my sweep");
    expect(stateToParams(s)).toEqual([["attn_view", "sweep"], ["attn_sweep", "runs/my sweep"]]);
    const again = stateFromParams(parseHash(mergeHash("#tb_attn&tagFilter=x", s, "tb_attn")).params);
    expect(again).toEqual(s);
    expect(stateFromParams([["attn_sweep", ""]]).sweep).toBeNull();
  });
});

describe("a sweep's profiled cells among the runs", () => {
  // Real profile runs of the fixture's sweep (profile_run, as /sweep serves it: cpu_sweep/profiles/<cell_id>),
  // named as the Attention tab lists them under a logdir holding the sweep beside a user's own runs.
  const cells = doc.cells.map((c) => c.profile_run).filter((p): p is string => typeof p === "string");
  it("groups them under their sweep and keeps the user's runs first", () => {
    expect(cells.length).toBeGreaterThan(0);
    expect(cells.every((r) => sweepOfRun(r) === "cpu_sweep")).toBe(true);
    expect(sweepOfRun(cells[0].slice("cpu_sweep/".length))).toBe(".");
    // a user's run that merely has "profiles" in its path is theirs
    expect(sweepOfRun("exp/profiles/llama-7b")).toBeNull();
    expect(sweepOfRun("bert")).toBeNull();
    const split = splitSweepRuns(["bert", ...cells, "runs/sdpa"]);
    expect(split.own).toEqual(["bert", "runs/sdpa"]);
    expect(split.sweeps).toEqual([["cpu_sweep", cells]]);
  });
  it("opens a user's run first even when a profiled cell has more attention", () => {
    const ready = (calls: number, us: number) => [{ worker: "w", spans: [{ span: "1", status: "ready" as const,
      summary: { calls, attention_gpu_us: us } }] }];
    const runs = { runs: [{ run: cells[0], workers: ready(4, 900) }, { run: "bert", workers: ready(2, 10) }] };
    expect(defaultRun(runs)).toBe("bert");
    expect(defaultRun({ runs: [runs.runs[0]] })).toBe(cells[0]);
  });
});

describe("skippedLines", () => {
  it("says nothing when no line was skipped", () => {
    expect(skippedLines({ skipped_lines: 0 })).toBeNull();
  });
  it("counts every skipped line and lists the notes the plugin served", () => {
    // the notes as sweeps/store.problem writes them (tests/test_hostile_inputs_47.py builds these lines)
    const got = skippedLines({ skipped_lines: 25, skipped_notes: ["line 7: heads is a JSON list, not a value", "line 9: seq_len 1e+400 is not a size"] });
    expect(got?.summary).toBe("25 lines of sweep.jsonl are not sweep cells and were skipped (the first 2 listed).");
    expect(got?.notes).toEqual(["line 7: heads is a JSON list, not a value", "line 9: seq_len 1e+400 is not a size"]);
  });
  it("reads one line in the singular and an old answer without notes", () => {
    expect(skippedLines({ skipped_lines: 1 })?.summary).toBe("1 line of sweep.jsonl is not a sweep cell and was skipped.");
    expect(skippedLines({ skipped_lines: 1 })?.notes).toEqual([]);
  });
});

// The Sweep view: a `tb-attn sweep` run's time and peak memory against sequence length per backend
// on log-log axes with fitted exponents, crossovers, the best backend per (batch, seq_len), the OOM
// boundary and every cell, each measured cell linked to its profile run when it has one.

import { api, ApiError, untilReady } from "../api";
import { makeChart, tip } from "../charts";
import { clear, h, notice } from "../dom";
import { fmtBytes, fmtCount, fmtTflops } from "../format";
import {
  backendColor, backendsOf, batchesOf, bestGrid, fmtSeconds, seriesLabel, sharedShape, skippedLines, statusCounts,
  sweepSeries,
  type SweepSeries,
} from "../sweep_model";
import type { SweepCell, SweepDoc } from "../route_types";
import type { Ctx } from "./context";

export async function sweepView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const el = h("section", { class: "view view-sweep", "data-view": "sweep" });
  root.appendChild(el);
  el.appendChild(h("h2", null, "Sweep"));
  const list = await api.sweeps().catch((e: Error) => e);
  if (!ctx.alive()) return;
  if (list instanceof Error) {
    el.appendChild(notice("error", "Cannot list sweeps", list.message));
    return;
  }
  const sweeps = "loading" in list ? [] : list.sweeps;
  if (!sweeps.length) {
    el.appendChild(notice("empty", "No sweep in this logdir",
      "tb-attn sweep --logdir DIR writes DIR/sweep.jsonl; start TensorBoard with that directory (or a parent) as --logdir."));
    return;
  }
  // The sweep in the URL; else the one whose profile is the current run; else the first.
  const current = ctx.target?.run || "";
  const owner = sweeps.find((s) => current.startsWith(s.run === "." ? "profiles/" : `${s.run}/profiles/`));
  const run = ctx.state.sweep && sweeps.some((s) => s.run === ctx.state.sweep) ? ctx.state.sweep
    : (owner || sweeps[0]).run;
  const pick = h("select", { "aria-label": "sweep", "data-testid": "sweep-select" },
    ...sweeps.map((s) => h("option", { value: s.run, selected: s.run === run }, s.run)));
  pick.addEventListener("change", () => ctx.set({ sweep: pick.value }));
  el.appendChild(h("div", { class: "controls" }, h("label", null, "Sweep run ", pick)));
  const status = h("div");
  el.appendChild(status);
  let doc: SweepDoc | null;
  try {
    doc = await untilReady(() => api.sweep(run), () => undefined, ctx.alive);
  } catch (e) {
    if (!ctx.alive()) return;
    status.appendChild(notice("error", `Cannot read the sweep ${run}`,
      (e as Error).message + (e instanceof ApiError ? ` (HTTP ${e.status})` : "")));
    return;
  }
  if (!doc || !ctx.alive()) return;
  drawSweep(ctx, el, doc);
}

function drawSweep(ctx: Ctx, el: HTMLElement, doc: SweepDoc): void {
  const skipped = skippedLines(doc);
  if (!doc.cells.length) {
    el.appendChild(notice("empty", `${doc.run}: no cells yet`, skipped ? skipped.summary : "The sweep has not finished a cell yet."));
    if (skipped?.notes.length) el.appendChild(skippedNotes(skipped.notes));
    return;
  }
  const all = backendsOf(doc);
  el.appendChild(h("div", { class: "facts", "data-testid": "sweep-facts" },
    ...sharedShape(doc).map(([k, v]) => h("span", null, h("span", { class: "fact-k" }, k), h("span", { class: "fact-v" }, v))),
    ...statusCounts(doc).map(([k, v]) => h("span", { "data-status-count": k },
      h("span", { class: "fact-k" }, k), h("span", { class: "fact-v" }, String(v))))));
  if (skipped) {
    el.appendChild(h("p", { class: "hint err" }, skipped.summary));
    if (skipped.notes.length) el.appendChild(skippedNotes(skipped.notes));
  }

  const batches = batchesOf(doc);
  const chartBox = h("div");
  el.appendChild(h("div", { class: "controls" }, h("span", { class: "toggle-label" }, "Batch"),
    h("div", { class: "toggle", role: "group", "aria-label": "batch", "data-toggle": "sweep-batch" },
      ...batches.map((b, i) => h("button", {
        type: "button", class: i === 0 ? "on" : "", "data-value": String(b), "aria-pressed": i === 0 ? "true" : "false",
        onclick: (ev: Event) => {
          const btn = ev.currentTarget as HTMLElement;
          btn.parentElement?.querySelectorAll("button").forEach((x) => {
            x.classList.toggle("on", x === btn);
            x.setAttribute("aria-pressed", x === btn ? "true" : "false");
          });
          drawCharts(ctx, chartBox, doc, b, all);
        },
      }, `B=${b}`)))));
  el.appendChild(chartBox);
  drawCharts(ctx, chartBox, doc, batches[0], all);

  el.appendChild(h("p", { class: "hint" }, "Log-log axes: a straight line of slope 2 grows as L² (the score matrix of math and eager), "
    + "slope 1 linearly (fused kernels' memory). Diamonds mark the first length that ran out of memory."));
  el.appendChild(h("p", { class: "hint", "data-testid": "sweep-conventions" },
    `FLOPs: ${doc.conventions.flops}. Time: ${doc.conventions.timing}. `
    + Object.entries(doc.conventions.peak_memory).map(([d, t]) => `Peak memory on ${d}: ${t}.`).join(" ")
    + ` % of peak: ${doc.conventions.pct_of_peak}.`));

  el.appendChild(h("h3", null, "Best backend per batch and sequence length"));
  const grid = bestGrid(doc);
  el.appendChild(h("table", { class: "grid sweep-best", "data-testid": "sweep-best" },
    h("thead", null, h("tr", null, h("th", null, "batch \\ L"), ...grid.seqLens.map((l) => h("th", { class: "num" }, fmtCount(l))))),
    h("tbody", null, ...grid.batches.map((b) => h("tr", null, h("th", null, `B=${b}`), ...grid.seqLens.map((l) => {
      const g = grid.cell(b, l);
      if (!g.best?.backend) return h("td", { class: "none", "data-best": "", "data-batch": b, "data-seq-len": l }, g.none || "—");
      const c = backendColor(g.best.backend, all);
      return h("td", { "data-best": g.best.backend, "data-batch": b, "data-seq-len": l, style: `border-left: 4px solid ${c}` },
        h("div", { class: "best-name" }, g.best.backend),
        h("div", { class: "hint" }, fmtSeconds(g.best.median_s)
          + (g.best.speedup && g.best.runner_up ? ` · ${g.best.speedup.toFixed(2)}× vs ${g.best.runner_up}` : "")),
        typeof g.best.noisy_fraction === "number"
          ? h("div", { class: "hint err", "data-testid": "sweep-best-noisy" },
            `noisy: IQR ${Math.round(100 * g.best.noisy_fraction)}% of the median, not a ranking to rely on`)
          : null,
        g.best.unranked?.length
          ? h("div", { class: "hint" }, `not ranked (timed fewer than 3 times): ${g.best.unranked.join(", ")}`)
          : null);
    }))))));

  el.appendChild(h("h3", null, "Crossovers"));
  el.appendChild(doc.analysis.crossovers.length
    ? h("ul", { class: "exponents", "data-testid": "sweep-crossovers" }, ...doc.analysis.crossovers.map((x) => h("li", null,
      `B=${x.batch}: ${x.faster_below} is faster below L ≈ ${fmtCount(x.seq_len)}, ${x.faster_above} above `
      + `(between the measured lengths ${fmtCount(x.between[0])} and ${fmtCount(x.between[1])}).`
      + (x.noisy_fraction != null ? ` Noisy: a cell's IQR is ${Math.round(100 * x.noisy_fraction)}% of its median, not a crossover to rely on.`
        : x.noise_unknown ? " Noise unknown: a cell has no spread, not a crossover to rely on." : ""))))
    : h("p", { class: "hint", "data-testid": "sweep-crossovers" }, "No two backends swap places between the measured lengths."));

  el.appendChild(h("h3", null, "Out-of-memory boundary"));
  el.appendChild(doc.analysis.oom_boundary.length
    ? h("table", { class: "grid", "data-testid": "sweep-oom" },
      h("thead", null, h("tr", null, ...["Backend", "Batch", "Fits up to L", "Out of memory from L"].map((t) => h("th", null, t)))),
      h("tbody", null, ...doc.analysis.oom_boundary.map((o) => h("tr", null, h("td", null, o.backend), h("td", { class: "num" }, String(o.batch)),
        h("td", { class: "num" }, o.max_ok_seq_len === null ? "never" : fmtCount(o.max_ok_seq_len)),
        h("td", { class: "num" }, fmtCount(o.min_oom_seq_len))))))
    : h("p", { class: "hint", "data-testid": "sweep-oom" }, "No cell ran out of memory."));

  el.appendChild(h("h3", null, "Every cell"));
  el.appendChild(cellsTable(ctx, doc));
}

function drawCharts(ctx: Ctx, box: HTMLElement, doc: SweepDoc, batch: number, all: string[]): void {
  clear(box);
  const timeEl = h("div", { class: "chart", "data-chart": "sweep-time" });
  const memEl = h("div", { class: "chart", "data-chart": "sweep-memory" });
  const time = sweepSeries(doc, batch, "time");
  const mem = sweepSeries(doc, batch, "memory");
  box.appendChild(h("div", { class: "chart-pair" },
    h("div", null, h("h3", null, `Median time per call (B=${batch})`), timeEl),
    h("div", null, h("h3", null, `Peak memory per call (B=${batch})`), memEl)));
  box.appendChild(h("ul", { class: "exponents", "data-testid": "sweep-exponents" }, ...time.map((s) => {
    const m = mem.find((x) => x.backend === s.backend);
    return h("li", { "data-backend": s.backend },
      h("span", { class: "attn-dot", style: `background:${backendColor(s.backend, all)}` }), s.backend,
      s.exponent === null ? " (one length)" : ` time ∝ L^${s.exponent.toFixed(2)}`,
      s.exponent !== null && s.noisy !== null
        ? h("span", { class: "hint err", "data-testid": "sweep-noisy" },
          ` (noisy: a cell's IQR is ${Math.round(100 * s.noisy)}% of its median, so this exponent is unreliable)`)
        : "",
      m && m.exponent !== null ? `, memory ∝ L^${m.exponent.toFixed(2)}` : "",
      s.oomAt !== null ? `, out of memory from L=${fmtCount(s.oomAt)}` : "");
  })));
  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    makeChart(timeEl, chartOption(time, all, "time per call", fmtSeconds, 10));
    makeChart(memEl, chartOption(mem, all, "peak memory", fmtBytes, 4));
  });
}

function chartOption(series: SweepSeries[], all: string[], name: string, fmt: (v: number) => string, logBase: number) {
  const top = Math.max(1e-12, ...series.flatMap((s) => s.points.map((p) => p.value)));
  const out: Record<string, unknown>[] = [];
  for (const s of series) {
    const color = backendColor(s.backend, all);
    out.push({
      type: "line", name: seriesLabel(s), symbolSize: 7, itemStyle: { color },
      data: s.points.map((p) => ({ value: [p.seqLen, p.value], cell: p.cell })),
    });
    if (s.oomAt !== null) {
      // The first length that did not fit, drawn above the highest measured value.
      out.push({
        type: "line", name: seriesLabel(s), symbol: "diamond", symbolSize: 13, itemStyle: { color },
        label: { show: true, formatter: "OOM", position: "top", color }, lineStyle: { opacity: 0 },
        data: [{ value: [s.oomAt, top * 1.6], oom: true, backend: s.backend }],
      });
    }
  }
  return {
    grid: { left: 80, right: 24, top: 48, bottom: 50 },
    legend: { top: 0, type: "scroll" },
    tooltip: {
      trigger: "item",
      formatter: (p: { data: { value: [number, number]; cell?: SweepCell; oom?: boolean; backend?: string }; color: string }) => {
        if (p.data.oom) return tip(p.data.backend || "", [["out of memory from", `L=${fmtCount(p.data.value[0])}`]], p.color);
        const c = p.data.cell as SweepCell;
        return tip(c.module || c.backend, [["batch", String(c.batch)], ["sequence length", fmtCount(c.seq_len)],
          [name, fmt(p.data.value[1])], ["IQR", fmtSeconds(c.iqr_s)],
          ["throughput", fmtTflops(c.tflops)]], p.color);
      },
    },
    xAxis: { type: "log", logBase: 2, name: "sequence length", nameLocation: "middle", nameGap: 28 },
    yAxis: { type: "log", logBase, name, axisLabel: { formatter: fmt } },
    series: out,
  };
}

function cellsTable(ctx: Ctx, doc: SweepDoc): HTMLElement {
  const cols = ["Backend", "B", "L", "Status", "Median", "IQR", "Throughput", "% peak", "Tokens/s", "Peak memory", "Max |err| vs math", "Profile"];
  const rows = [...doc.cells].sort((a, b) => a.batch - b.batch || a.seq_len - b.seq_len || (a.module || a.backend).localeCompare(b.module || b.backend));
  return h("table", { class: "grid", "data-testid": "sweep-cells" },
    h("thead", null, h("tr", null, ...cols.map((c, i) => h("th", { class: i === 1 || i === 2 || (i >= 4 && i <= 10) ? "num" : null }, c)))),
    h("tbody", null, ...rows.map((c) => h("tr", { "data-cell": c.cell_id || "", "data-status": c.status },
      h("td", null, c.module || c.backend),
      h("td", { class: "num" }, String(c.batch)),
      h("td", { class: "num" }, fmtCount(c.seq_len)),
      h("td", { class: `status-${c.status}`, title: c.reason || null }, c.status + (c.status !== "ok" && c.reason ? `: ${c.reason.slice(0, 80)}` : "")),
      h("td", { class: "num", "data-seconds": c.median_s ?? "" }, fmtSeconds(c.median_s)),
      h("td", { class: "num" }, fmtSeconds(c.iqr_s)),
      h("td", { class: "num", "data-tflops": c.tflops ?? "" }, fmtTflops(c.tflops)),
      h("td", { class: "num" }, c.pct_of_peak == null ? "—" : `${c.pct_of_peak.toFixed(1)}%`),
      h("td", { class: "num" }, c.tokens_per_s == null ? "—" : fmtCount(c.tokens_per_s)),
      h("td", { class: "num", "data-bytes": c.peak_bytes ?? "" }, fmtBytes(c.peak_bytes)),
      h("td", { class: "num" }, c.max_abs_error == null ? "—" : c.max_abs_error.toExponential(1)),
      h("td", null, c.profile_run
        ? h("button", { type: "button", class: "link", "data-profile": c.profile_run, title: c.profile_run,
          onclick: () => ctx.set({ view: "summary", run: c.profile_run as string, worker: null, span: null, layer: null, call: null }) },
        "open profile")
        : "")))));
}

function skippedNotes(notes: string[]): HTMLElement {
  return h("details", { class: "numbers", "data-testid": "sweep-skipped-notes" }, h("summary", null, "why"),
    h("ul", null, ...notes.map((n) => h("li", null, n))));
}

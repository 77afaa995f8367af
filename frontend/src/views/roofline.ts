// The Roofline view: achieved TFLOP/s against arithmetic intensity on log-log axes, one point per
// layer type, implementation and length class (or per stage), under the device's roof; and, in Compare, both runs
// on one chart with the speed-up split into memory traffic, compute, launches, CPU and the rest.

import { makeChart, tip } from "../charts";
import { h } from "../dom";
import { fmtTbs, fmtTflops, fmtUs } from "../format";
import { defaultTarget } from "../runs_model";
import { BOUND_COLOR, ROOF_COLORS } from "../colors";
import {
  decompositionModel, fractionText, pointSeries, roofNoteText, rooflineChart, rooflineOf, type ChartPoint, type RooflineChart,
} from "../roofline_model";
import type { Report } from "../types";
import type { CompareDoc } from "../route_types";
import { badge } from "./common";
import type { Ctx } from "./context";

const GRID = { left: 80, right: 30, top: 60, bottom: 55 };

const sig = (v: number | null | undefined, d = 3): string =>
  v === null || v === undefined || !Number.isFinite(v) ? "–" : Number(v.toPrecision(d)).toString();
const pct = fractionText;
const tbs = (v: number | null | undefined): string => (v === null || v === undefined ? "–" : fmtTbs(v));

let perStage = false; // the points toggle: per layer type (default) or per stage; not worth a URL key

export async function rooflineView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const el = h("section", { class: "view view-roofline", "data-view": "roofline" });
  root.appendChild(el);
  el.appendChild(h("h2", null, "Roofline"));
  const status = h("div");
  el.appendChild(status);
  const report = await ctx.report(status);
  if (!report || !ctx.alive()) return;
  const rf = rooflineOf(report);
  if (!rf || !rf.layers.length) {
    el.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status" },
      h("div", { class: "notice-title" }, rf ? "No attention call with a known shape" : "This report has no roofline"),
      h("div", { class: "notice-detail" }, "The roofline needs the attention shapes (record_shapes=True) to count FLOPs and bytes.")));
    return;
  }
  const byStage = perStage;
  el.appendChild(h("div", { class: "toggle", role: "group", "data-toggle": "roofline-points" },
    h("span", { class: "toggle-label" }, "Points"),
    ...[["layers", "per layer type"], ["all", "per stage"]].map(([v, text]) => h("button", {
      type: "button", class: (v === "all") === byStage ? "on" : "", "aria-pressed": (v === "all") === byStage ? "true" : "false",
      "data-value": v, onclick: () => { if ((v === "all") !== perStage) { perStage = v === "all"; ctx.set({}); } },
    }, text))));
  el.appendChild(roofNote(roofNoteText(rf.roof)));
  if (rf.above_roof) el.appendChild(h("p", { class: "warn", "data-testid": "roofline-above-roof" }, rf.above_roof));
  const chart = rooflineChart([{ run: ctx.target?.run || "", report }], byStage);
  drawChart(ctx, el, chart, "roofline");
  el.appendChild(layerTable(report));
  if (rf.convention) {
    el.appendChild(h("details", { class: "numbers", "data-testid": "roofline-convention" }, h("summary", null, "How these numbers are counted"),
      h("ul", null, ...Object.entries(rf.convention).map(([k, v]) => h("li", null, h("b", null, `${k}: `), v)))));
  }
}

function roofNote(text: string): HTMLElement {
  return h("p", { class: "hint", "data-testid": "roofline-roof" }, text);
}

function layerTable(report: Report): HTMLElement {
  const rf = rooflineOf(report);
  // Rates and bandwidths carry their own unit in each cell (a CPU's GB/s under a "TB/s" head misread by 1000x).
  const heads = ["Layer type", "Implementation", "Bound", "FLOP/B", "achieved (modelled stages)", "of attainable", "bandwidth", "time", "why"];
  return h("table", { class: "grid", "data-testid": "roofline-table" },
    h("thead", null, h("tr", null, ...heads.map((c, i) => h("th", { class: i >= 3 && i <= 7 ? "num" : null }, c)))),
    h("tbody", null, ...(rf?.layers || []).flatMap((l) => [
      h("tr", { "data-layer-type": l.layer_type, "data-bound": l.bound || "" },
        h("td", null, l.layer_type, l.lengths_text ? h("span", { class: "hint", "data-testid": "roofline-lengths" }, ` ${l.lengths_text}`) : null),
        h("td", null, badge(l.implementation)), h("td", null, boundChip(l.bound)),
        h("td", { class: "num" }, sig(l.intensity)), h("td", { class: "num" }, fmtTflops(l.achieved_tflops)),
        h("td", { class: "num", title: `attainable ${fmtTflops(l.attainable_tflops)}` }, pct(l.fraction)),
        h("td", { class: "num" }, tbs(l.achieved_tbs)), h("td", { class: "num" }, fmtUs(l.time_us)),
        h("td", { "data-testid": "roofline-line" }, l.line)),
      ...l.stages.map((s) => h("tr", { class: "sub", "data-stage": s.stage, "data-pass": s.pass },
        h("td", null, `  ${s.stage}${s.pass === "bwd" ? " (bwd)" : ""}`), h("td", null, ""), h("td", null, boundChip(s.bound)),
        h("td", { class: "num" }, sig(s.intensity)), h("td", { class: "num" }, fmtTflops(s.achieved_tflops)),
        h("td", { class: "num" }, pct(s.fraction)), h("td", { class: "num" }, tbs(s.achieved_tbs)),
        h("td", { class: "num" }, fmtUs(s.time_us)), h("td", { class: "hint" }, s.bound_reason))),
    ])));
}

function boundChip(b: string | null): HTMLElement {
  return h("span", { class: "stage-chip", "data-bound": b || "none" },
    h("span", { class: "attn-dot", style: `background:${BOUND_COLOR[b || "none"]}` }), b ? `${b}-bound` : "no roof");
}

function drawChart(ctx: Ctx, into: HTMLElement, m: RooflineChart, name: string, pageRuns: string[] = []): void {
  // The axes' ranges and the grid ride along as attributes: the browser test hovers a point by them.
  const el = h("div", { class: "chart chart-tall", "data-chart": name, "data-points": String(m.points.length),
    "data-roofs": String(m.roofs.length), "data-x-range": m.xRange.join(","), "data-y-range": m.yRange.join(","),
    "data-grid": Object.values(GRID).join(",") });
  into.appendChild(el);
  for (const n of m.notes) into.appendChild(h("p", { class: "hint" }, n));
  const series: unknown[] = pointSeries(m, pageRuns).map((s) => ({
    type: "scatter", name: s.name, symbol: s.symbol,
    symbolSize: (v: [number, number, number]) => Math.max(8, Math.min(26, 6 + 3 * Math.log10(1 + v[2]))),
    itemStyle: { color: s.color, opacity: 0.85 },
    data: s.points.map((p) => ({ value: [p.x, p.y, p.timeUs], point: p })),
  }));
  m.roofs.forEach((r, i) => series.push({
    type: "line", name: r.label, data: r.line, symbol: "none", silent: true,
    lineStyle: { color: ROOF_COLORS[i % ROOF_COLORS.length], width: 2, type: i ? "dashed" : "solid" },
    itemStyle: { color: ROOF_COLORS[i % ROOF_COLORS.length] },
  }));
  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    makeChart(el, {
      grid: GRID,
      legend: { top: 0, type: "scroll" },
      tooltip: {
        trigger: "item",
        formatter: (p: { data: { point?: ChartPoint }; color: string; seriesName: string }) => {
          const pt = p.data?.point;
          if (!pt) return tip(p.seriesName, []);
          return tip(pt.label, [
            ["intensity", `${sig(pt.x)} FLOP/B`], ["achieved", `${fmtTflops(pt.y)}, ${tbs(pt.tbs)}`],
            ["attainable", pt.attainable === null ? "no roof" : `${fmtTflops(pt.attainable)} (${pt.precision})`],
            ["of attainable", pct(pt.fraction)], ["time", fmtUs(pt.timeUs)], ["bound", pt.bound || "–"], ["why", pt.reason],
          ], p.color);
        },
      },
      xAxis: { type: "log", name: "arithmetic intensity (FLOP/byte)", nameLocation: "middle", nameGap: 30, min: m.xRange[0], max: m.xRange[1], logBase: 10 },
      yAxis: { type: "log", name: "TFLOP/s", min: m.yRange[0], max: m.yRange[1], logBase: 10 },
      series,
    });
  });
}

/** Compare's part: the decomposition of the difference, then both runs on one roofline chart. */
export async function rooflineCompareSection(ctx: Ctx, out: HTMLElement, doc: CompareDoc): Promise<void> {
  const d = decompositionModel(doc);
  const box = h("div", { class: "roofline-compare", "data-testid": "compare-decomposition" });
  out.appendChild(box);
  box.appendChild(h("h3", null, "Where the difference comes from"));
  if (!d) {
    box.appendChild(h("p", { class: "hint" }, "No decomposition: these reports have no roofline timing."));
  } else {
    box.appendChild(h("div", { class: "headline", "data-testid": "decomposition-sentence" }, d.sentence));
    const max = Math.max(1e-9, ...d.rows.map((r) => Math.abs(r.us)));
    box.appendChild(h("table", { class: "grid", "data-testid": "decomposition-table" },
      h("thead", null, h("tr", null, h("th", null, "Part"), h("th", { class: "num" }, "Δ"), h("th", null, ""))),
      h("tbody", null, ...d.rows.map((r) => h("tr", { "data-part": r.part },
        h("td", null, r.label),
        h("td", { class: `num ${r.us < 0 ? "better" : r.us > 0 ? "worse" : ""}`, "data-us": String(r.us) }, `${r.us > 0 ? "+" : r.us < 0 ? "−" : ""}${fmtUs(Math.abs(r.us))}`),
        h("td", { class: "bar-cell" }, h("span", { class: `bar ${r.us < 0 ? "bar-better" : "bar-worse"}`, style: `width:${(100 * Math.abs(r.us) / max).toFixed(1)}%` })))),
      h("tr", { class: "total", "data-part": "measured" }, h("td", null, `Measured difference (${d.runs[1]} − ${d.runs[0]}, ${d.basis.toUpperCase()} time with gaps)`),
        h("td", { class: "num", "data-us": String(d.measuredUs) }, `${d.measuredUs > 0 ? "+" : d.measuredUs < 0 ? "−" : ""}${fmtUs(Math.abs(d.measuredUs))}`),
        h("td", null, "")))));
  }
  const items: { run: string; report: Report }[] = [];
  const status = h("div");
  box.appendChild(status);
  for (const run of doc.runs) {
    const t = defaultTarget(ctx.runs, run);
    if (!t) continue;
    const r = await ctx.report(status, { run, worker: t.worker, span: t.span });
    if (!ctx.alive()) return;
    if (r) items.push({ run, report: r });
  }
  if (items.length < 2) return;
  box.appendChild(h("h3", null, `${items.length === 2 ? "Both runs" : `All ${items.length} runs`} on one roofline`));
  drawChart(ctx, box, rooflineChart(items), "roofline-compare", doc.runs);
}

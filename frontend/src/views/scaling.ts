import { sweepOfRun } from "../sweep_runs";
import { makeChart, tip } from "../charts";
import { h } from "../dom";
import { fmtBytes, fmtCount, fmtUs } from "../format";
import { seriesStyle } from "../colors";
import { defaultTarget } from "../runs_model";
import { scalingModel, seriesKeyOf } from "../scaling_model";
import type { Report } from "../types";
import { badge, basisWord, usCell } from "./common";
import type { Ctx } from "./context";
import { memoryScalingChart } from "./memory";


export async function scalingView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const el = h("section", { class: "view view-scaling", "data-view": "scaling" });
  root.appendChild(el);
  el.appendChild(h("h2", null, "Scaling with sequence length"));
  // The runs picked for comparison, else every run of yours that has attention (a sweep's profiled cells only when picked).
  const names = ctx.state.compare.length >= 2 ? ctx.state.compare
    : (ctx.runs.runs || []).filter((r) => sweepOfRun(r.run) === null
      && r.workers.some((w) => w.spans.some((s) => (s.summary?.calls ?? 0) > 0))).map((r) => r.run);
  el.appendChild(h("p", { class: "hint" }, ctx.state.compare.length >= 2
    ? `Runs picked in Compare: ${names.join(", ")}.`
    : `Every run with attention (${names.length}); pick runs in Compare to narrow this down.`));
  const status = h("div");
  el.appendChild(status);
  const items: { run: string; report: Report }[] = [];
  for (const run of names) {
    const t = defaultTarget(ctx.runs, run);
    if (!t) continue;
    const r = await ctx.report(status, { run, worker: t.worker, span: t.span });
    if (!ctx.alive()) return;
    if (r) items.push({ run, report: r });
    else return; // the error is shown in status
  }
  while (status.firstChild) status.removeChild(status.firstChild);
  const m = scalingModel(items);
  if (m.distinctLengths < 2) {
    el.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status" },
      h("div", { class: "notice-title" }, "These runs do not differ in sequence length"),
      h("div", { class: "notice-detail" }, "Scaling needs two or more runs with different sequence lengths, from the collector's seq_len metadata or from the attention shapes. "
        + "Profile the same model at several lengths (the demo does) and pick those runs in Compare.")));
    if (m.skipped.length) el.appendChild(skippedList(m.skipped));
    return;
  }

  const charts = h("div", { class: "chart-pair" });
  el.appendChild(charts);
  const timeEl = h("div", { class: "chart", "data-chart": "scaling-time" });
  const memEl = h("div", { class: "chart", "data-chart": "scaling-memory" });
  const bases = [...new Set(m.series.map((s) => s.basis))];
  const timeWord = bases.length === 1 ? basisWord(bases[0]) : "GPU time for runs with kernels, CPU op time for the others";
  charts.appendChild(h("div", null, h("h3", null, `Attention time per call (${timeWord})`), timeEl));
  charts.appendChild(h("div", null, h("h3", null, "Score matrix per call (B·H·Lq·Lk)"), memEl));
  // One style per series on all three charts of the page (colors.seriesStyle): colour by implementation,
  // dashed when compiled, a marker per model and device.
  const groups = items.map(({ report }) => { const k = seriesKeyOf(report); return `${k.model} · ${k.device}`; });
  const seriesFor = (pick: (p: (typeof m.series)[number]["points"][number]) => number | null) =>
    m.series.map((s) => ({ s, style: seriesStyle(s.implementation, `${s.model} · ${s.device}`, groups) })).map(({ s, style }) => ({
      type: "line", name: s.label, symbolSize: 8, symbol: style.symbol, itemStyle: { color: style.color },
      lineStyle: { type: style.line, color: style.color },
      data: s.points.filter((p) => { const v = pick(p); return v !== null && v > 0; }).map((p) => [p.seqLen, pick(p), p.run]),
    })).filter((s) => s.data.length);
  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    const base = (yFmt: (v: number) => string, name: string, logBase: number) => ({
      grid: { left: 80, right: 20, top: 40, bottom: 50 },
      legend: { top: 0 },
      tooltip: {
        trigger: "item",
        formatter: (p: { seriesName: string; value: [number, number, string]; color: string }) =>
          tip(p.value[2], [["series", p.seriesName], ["sequence length", fmtCount(p.value[0])], [name, yFmt(p.value[1])]], p.color),
      },
      xAxis: { type: "log", name: "sequence length", nameLocation: "middle", nameGap: 28, logBase: 2 },
      yAxis: { type: "log", name, logBase, axisLabel: { formatter: yFmt } },
    });
    makeChart(timeEl, { ...base(fmtUs, "time per call", 10), series: seriesFor((p) => p.usPerCall) });
    makeChart(memEl, { ...base(fmtBytes, "score matrix", 4), series: seriesFor((p) => p.scoreBytes) });
  });

  el.appendChild(h("p", { class: "hint" }, "On log–log axes a straight line of slope 2 is quadratic growth, slope 1 is linear. "
    + "Fused kernels never write the score matrix, so they have no point on the memory chart."));
  el.appendChild(h("table", { class: "grid", "data-testid": "scaling-table" },
    h("thead", null, h("tr", null, ...["Implementation", "Model · device", "Run", "Sequence length", "from", "Time per call", "Steps", "Score matrix / call"]
      .map((c, i) => h("th", { class: i >= 3 && i !== 4 ? "num" : null }, c)))),
    h("tbody", null, ...m.series.flatMap((s) => s.points.map((p) => h("tr", { "data-run": p.run, "data-basis": s.basis },
      h("td", null, badge(s.implementation), s.variant && s.variant !== s.implementation ? ` ${s.variant}` : ""),
      h("td", null, `${s.model} · ${s.device}`), h("td", null, p.run), h("td", { class: "num" }, fmtCount(p.seqLen)),
      h("td", null, p.seqSource), usCell(p.usPerCall),
      h("td", { class: "num", title: p.spread === null ? "" : `per-step time varies by ${Math.round(100 * p.spread)}% of its median` },
        `${p.steps} (${basisWord(s.basis)})`),
      h("td", { class: "num", "data-bytes": p.scoreBytes ?? "" }, p.scoreBytes === null ? "not materialised" : fmtBytes(p.scoreBytes))))))));
  el.appendChild(h("ul", { class: "exponents", "data-testid": "scaling-exponents" }, ...m.series.map((s) => h("li", { "data-series": s.label },
    badge(s.implementation), ` ${s.label}:`,
    s.timeExponent === null ? " one length only"
      : s.timeCaveat === null ? ` time grows as L^${s.timeExponent.toFixed(2)}`
        : h("span", { class: "hint err", "data-testid": "scaling-unreliable" },
          ` time ~ L^${s.timeExponent.toFixed(2)}, unreliable: ${s.timeCaveat}`),
    s.memExponent === null ? "" : `; score matrix as L^${s.memExponent.toFixed(2)} (from shapes)`))));
  memoryScalingChart(ctx, el, items, groups);
  if (m.skipped.length) el.appendChild(skippedList(m.skipped));
}

function skippedList(skipped: { run: string; why: string }[]): HTMLElement {
  return h("details", { class: "numbers" }, h("summary", null, `${skipped.length} run${skipped.length === 1 ? "" : "s"} left out`),
    h("ul", null, ...skipped.map((s) => h("li", null, `${s.run}: ${s.why}`))));
}

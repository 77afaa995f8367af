import { makeChart, tip } from "../charts";
import { h } from "../dom";
import { fmtBytes, fmtCount, fmtShare, fmtSpan, fmtTflops, fmtUs, usAxis } from "../format";
import { stageLabel } from "../model";
import { summaryModel } from "../summary_model";
import { stageColor } from "../colors";
import type { Report } from "../types";
import { badge, basisWord, usCell } from "./common";
import { annotatedLink, unknownPanel } from "./unknown";
import type { Ctx } from "./context";

export async function summaryView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const report = await ctx.report(root);
  if (!report) return;
  root.appendChild(summaryPanel(ctx, report));
}

export function summaryPanel(ctx: Ctx, report: Report): HTMLElement {
  const m = summaryModel(report);
  const el = h("section", { class: "view view-summary", "data-view": "summary" });
  const t = ctx.target!;
  el.appendChild(h("h2", null, "Summary ",
    h("span", { class: "sub", title: t.span ?? "" }, `${t.run} · ${t.worker ?? ""}${t.span ? " · " + fmtSpan(t.span) : ""}`)));

  el.appendChild(h("div", { class: "cards" },
    card("Device", m.device, m.deviceDetail, "device"),
    card("Profiler steps", m.steps ? fmtCount(m.steps) : "none marked", "ProfilerStep# ranges in the trace", "steps"),
    card("Attention calls", fmtCount(m.calls), `${m.layerTypes.length} layer type${m.layerTypes.length === 1 ? "" : "s"}`, "calls"),
    card(`Attention share of ${m.basis.toUpperCase()} time`, fmtShare(m.share),
      `${fmtUs(m.attentionUs)} of ${fmtUs(m.totalUs)} (${basisWord(m.basis)})`, "share"),
  ));

  if (m.empty) {
    el.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status" },
      h("div", { class: "notice-title" }, "No attention found in this trace"),
      h("div", { class: "notice-detail" },
        `tb-attn read ${fmtCount(report.trace?.kernels ?? 0)} kernels and ${fmtCount(report.trace?.ops ?? 0)} ops `
        + "and found no attention call: no SDPA or attention op, no fused attention kernel and no QKᵀ → softmax → AV chain.")));
  }

  const unknown = unknownPanel(report);
  if (unknown) el.appendChild(unknown);
  el.appendChild(annotatedLink(t));

  // Implementations as badges.
  if (m.badges.length) {
    el.appendChild(h("h3", null, "Implementation per layer type"));
    el.appendChild(h("div", { class: "badges", "data-testid": "badges" },
      ...m.badges.map((b) => h("div", { class: "badge-row" },
        h("span", { class: "layer-type" }, b.layerType),
        badge(b.implementation, `${fmtCount(b.calls)} call${b.calls === 1 ? "" : "s"}`),
        b.compiled ? badge("compiled") : null))));
  }

  // Verdicts.
  if (m.verdicts.length) {
    el.appendChild(h("h3", null, "Verdicts"));
    el.appendChild(h("ul", { class: "verdicts", "data-testid": "verdicts" },
      ...m.verdicts.map((v) => h("li", { class: `verdict verdict-${v.severity}`, "data-verdict": v.id },
        h("span", { class: "sev" }, v.severity === "warn" ? "!" : v.severity === "error" ? "×" : "i"),
        h("span", null, v.message)))));
  }

  // Stage split (a single stacked bar per pass) and the per-type table.
  if (m.stages.length) {
    el.appendChild(h("h3", null, `Where attention time goes (${basisWord(m.basis)})`));
    const chartEl = h("div", { class: "chart chart-short", "data-chart": "summary-stages" });
    el.appendChild(chartEl);
    const passes = [...new Set(m.stages.map((s) => s.pass))];
    requestAnimationFrame(() => {
      if (!ctx.alive()) return;
      makeChart(chartEl, {
        grid: { left: 60, right: 20, top: 30, bottom: 20 },
        legend: { top: 0, type: "scroll" },
        tooltip: {
          trigger: "item",
          formatter: (p: { seriesName: string; value: number; color: string }) =>
            tip(p.seriesName, [["time", fmtUs(p.value)], ["share", fmtShare(p.value / (m.stages.reduce((a, s) => a + s.us, 0) || 1))]], p.color),
        },
        xAxis: { type: "value", name: basisWord(m.basis), nameLocation: "middle", nameGap: 26,
          axisLabel: { formatter: usAxis(Math.max(0, ...passes.map((p) => m.stages.filter((s) => s.pass === p).reduce((a, s) => a + s.us, 0)))) } },
        yAxis: { type: "category", data: passes, inverse: true },
        series: [...new Set(m.stages.map((s) => s.stage))].map((stage) => ({
          type: "bar", stack: "all", name: stageLabel(stage), itemStyle: { color: stageColor(stage) },
          data: passes.map((p) => m.stages.find((s) => s.stage === stage && s.pass === p)?.us ?? 0),
        })),
      });
    });
    el.appendChild(h("table", { class: "grid", "data-testid": "summary-stages" },
      h("thead", null, h("tr", null, h("th", null, "Stage"), h("th", null, "Pass"), h("th", { class: "num" }, "Time"),
        h("th", { class: "num" }, "Share"))),
      h("tbody", null, ...m.stages.map((s) => h("tr", { "data-stage": s.stage, "data-pass": s.pass },
        h("td", null, h("span", { class: "attn-dot", style: `background:${stageColor(s.stage)}` }), stageLabel(s.stage)),
        h("td", null, s.pass), usCell(s.us), h("td", { class: "num" }, fmtShare(s.share)))))));
  }

  if (m.layerTypes.length) {
    el.appendChild(h("h3", null, "Layer types"));
    el.appendChild(h("table", { class: "grid", "data-testid": "layer-types" },
      h("thead", null, h("tr", null, ...["Layer type", "Implementation", "Calls", "Time (whole call)", "Shape", "Achieved (core)",
        "of peak", "Score matrix / call"].map((c, i) => h("th", { class: i >= 2 && i !== 4 ? "num" : null }, c)))),
      h("tbody", null, ...m.layerTypes.map((l) => h("tr", { "data-layer-type": l.layerType },
        h("td", null, l.layerType),
        h("td", null, badge(l.implementation)),
        h("td", { class: "num" }, fmtCount(l.calls)),
        usCell(l.us),
        h("td", null, l.shape || "—"),
        h("td", { class: "num", "data-tflops": l.tflops ?? "" }, fmtTflops(l.tflops)),
        h("td", { class: "num" }, l.peakPct === null ? (m.peakTflops ? "—" : "peak unknown") : `${l.peakPct < 1 ? l.peakPct.toPrecision(2) : l.peakPct.toFixed(1)}%`),
        h("td", { class: "num", "data-bytes": l.scoreBytes ?? "", title: l.scoreBytes === null ? "not materialised (fused) or unknown" : "B·H·Lq·Lk elements" },
          l.scoreBytes === null ? "—" : fmtBytes(l.scoreBytes)))))));
  }

  if (m.metadata.length) {
    el.appendChild(h("h3", null, "Run metadata"));
    el.appendChild(h("dl", { class: "meta" }, ...m.metadata.flatMap(([k, v]) => [h("dt", null, k), h("dd", null, v)])));
  }
  return el;
}

function card(title: string, value: string, detail: string, key: string): HTMLElement {
  return h("div", { class: "card", "data-card": key },
    h("div", { class: "card-title" }, title),
    h("div", { class: "card-value" }, value),
    detail ? h("div", { class: "card-detail" }, detail) : null);
}

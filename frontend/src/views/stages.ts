import { api, untilReady } from "../api";
import { makeChart, tip } from "../charts";
import { h } from "../dom";
import { distinctShortNames, fmtBytes, fmtCount, fmtTflops, fmtUs, usAxis } from "../format";
import { basisOf } from "../model";
import { layerDetail, stagesByLayer } from "../stages_model";
import { shapeText } from "../summary_model";
import type { Report } from "../types";
import type { Basis, Pass } from "../tags";
import { badge, basisWord, kernelName, stageChip, toggle, usCell } from "./common";
import type { Ctx } from "./context";
import { readingPanel } from "./reading";

export async function stagesView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const report = await ctx.report(root);
  if (!report) return;
  const el = h("section", { class: "view view-stages", "data-view": "stages" });
  root.appendChild(el);
  const reportBasis = basisOf(report);
  const hasGpu = reportBasis === "gpu";
  const basis: Basis = ctx.state.basis === "cpu" || !hasGpu ? "cpu" : "gpu";
  const hasBwd = (report.stages || []).some((s) => s.pass === "bwd");
  const pass: Pass = ctx.state.pass === "bwd" && hasBwd ? "bwd" : "fwd";

  el.appendChild(h("h2", null, "Stages by layer ", h("span", { class: "sub" }, `${basisWord(basis)}, ${pass === "fwd" ? "forward" : "backward"}`)));
  el.appendChild(h("div", { class: "controls" },
    toggle("Pass", [
      { value: "fwd" as Pass, text: "Forward" },
      { value: "bwd" as Pass, text: "Backward", disabled: !hasBwd, title: hasBwd ? undefined : "this trace has no backward attention" },
    ], pass, (v) => ctx.set({ pass: v, layer: null }), "pass"),
    toggle("Time", [
      { value: "gpu" as Basis, text: "GPU", disabled: !hasGpu, title: hasGpu ? undefined : "this trace has no GPU kernels" },
      { value: "cpu" as Basis, text: "CPU" },
    ], basis, (v) => ctx.set({ basis: v }), "basis")));

  const m = stagesByLayer(report, pass, basis);
  if (!m.layers.length || !m.series.length) {
    el.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status" },
      h("div", { class: "notice-title" }, (report.layers || []).length
        ? `No ${pass === "fwd" ? "forward" : "backward"} attention time on the ${basis.toUpperCase()}`
        : "No attention found in this trace")));
    return;
  }

  const chartEl = h("div", { class: "chart", "data-chart": "stages" });
  el.appendChild(chartEl);
  el.appendChild(h("p", { class: "hint" }, "Click a bar to open that layer's stages and kernels."));
  const detailEl = h("div", { class: "layer-detail-slot" });
  el.appendChild(detailEl);

  const many = m.layers.length > 40;
  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    const chart = makeChart(chartEl, {
      grid: { left: 70, right: 20, top: 40, bottom: many ? 90 : 70 },
      legend: { top: 0, type: "scroll" },
      tooltip: {
        trigger: "axis", axisPointer: { type: "shadow" },
        formatter: (ps: { dataIndex: number; seriesName: string; value: number; color: string }[]) => {
          const i = ps[0]?.dataIndex ?? 0;
          return tip(m.layers[i], [
            ["implementation", m.implementations[i]], ["total", fmtUs(m.totals[i])],
            ...ps.filter((p) => p.value > 0).map((p) => [p.seriesName, fmtUs(p.value)] as [string, string]),
          ]);
        },
      },
      xAxis: { type: "category", data: m.layers, axisLabel: { rotate: 45, interval: many ? "auto" : 0, fontSize: 10 } },
      // The ticks carry their unit (µs, ms, s): the title names only what is measured.
      yAxis: { type: "value", name: basisWord(basis), axisLabel: { formatter: usAxis(Math.max(0, ...m.totals)) } },
      dataZoom: many ? [{ type: "slider", bottom: 5, height: 18 }, { type: "inside" }] : [],
      series: m.series.map((s) => ({
        type: "bar", stack: "layer", name: s.label, data: s.values, itemStyle: { color: s.color }, cursor: "pointer",
        emphasis: { focus: "series" },
      })),
    });
    chart.on("click", (p: unknown) => {
      const i = (p as { dataIndex?: number }).dataIndex;
      if (typeof i === "number" && m.layers[i]) ctx.set({ layer: m.layers[i] });
    });
  });

  if (ctx.state.layer) {
    const d = layerDetailPanel(ctx, report, ctx.state.layer, basis);
    if (d) detailEl.appendChild(d);
  }

  // The chart's numbers, for reading and for tests.
  el.appendChild(h("details", { class: "numbers" },
    h("summary", null, "Numbers"),
    h("table", { class: "grid", "data-testid": "stages-table" },
      h("thead", null, h("tr", null, h("th", null, "Layer"), h("th", null, "Implementation"),
        ...m.series.map((s) => h("th", { class: "num" }, s.label)), h("th", { class: "num" }, "Total"))),
      h("tbody", null, ...m.layers.map((layer, i) => h("tr", { "data-layer": layer },
        h("td", null, h("a", { href: "#", onclick: (ev: Event) => { ev.preventDefault(); ctx.set({ layer }); } }, layer)),
        h("td", null, m.implementations[i]),
        ...m.series.map((s) => usCell(s.values[i])), usCell(m.totals[i])))))));
}

function layerDetailPanel(ctx: Ctx, report: Report, layerName: string, basis: Basis): HTMLElement | null {
  const d = layerDetail(report, layerName);
  if (!d) return h("div", { class: "notice notice-error", "data-state": "error", role: "alert" },
    h("div", { class: "notice-title" }, "No such layer in this run"), h("div", { class: "notice-detail" }, layerName));
  const L = d.layer;
  const el = h("div", { class: "layer-detail", "data-layer": L.layer, "data-testid": "layer-detail" },
    h("div", { class: "layer-detail-head" },
      h("h3", null, L.layer),
      badge(L.implementation || "unknown"),
      L.compiled ? badge("compiled") : null,
      h("button", { type: "button", class: "link", onclick: () => ctx.set({ layer: null }) }, "close")),
    h("div", { class: "facts" },
      fact("type", L.layer_type || "—"), fact("calls", fmtCount(L.calls ?? 0)),
      fact("shape", shapeText(L.shape) || "—"), fact("dtype", L.dtype || "—"),
      fact("causal", L.causal === null || L.causal === undefined ? "—" : String(L.causal)),
      fact("achieved (core)", fmtTflops(L.tflops)), fact("score matrix / call", L.score_bytes ? fmtBytes(L.score_bytes) : "—"),
      fact(basis.toUpperCase() + " time (whole call)", fmtUs(basis === "gpu" ? L.gpu_us : L.cpu_us))));
  el.appendChild(h("table", { class: "grid" },
    h("thead", null, h("tr", null, h("th", null, "Stage"), h("th", { class: "num" }, "GPU"), h("th", { class: "num" }, "CPU"),
      h("th", { class: "num" }, "GPU kernels"))),
    h("tbody", null, ...d.stages.map((s) => h("tr", null, h("td", null, stageChip(s.stage, s.pass)), usCell(s.gpu_us),
      usCell(s.cpu_us), h("td", { class: "num" }, fmtCount(s.kernels)))))));
  if (d.kernels.length) {
    el.appendChild(h("h4", null, d.kernelScope === "layer" ? `Kernels of its ${fmtCount(L.calls ?? 0)} calls` : "Kernels of its first call",
      d.sampleId !== null ? h("button", {
        type: "button", class: "link", "data-action": "open-timeline",
        onclick: () => ctx.set({ view: "timeline", call: d.sampleId }),
      }, " → open this call's timeline") : null));
    const short = distinctShortNames(d.kernels.map((k) => k.name));
    el.appendChild(h("table", { class: "grid", "data-testid": "layer-kernels" },
      h("thead", null, h("tr", null, h("th", null, "Stage"), h("th", null, "Kernel"), h("th", { class: "num" }, "Count"),
        h("th", { class: "num" }, "GPU time"))),
      h("tbody", null, ...d.kernels.map((k) => h("tr", null, h("td", null, stageChip(k.stage, k.pass)),
        h("td", null, kernelName(k.name, short.get(k.name) ?? k.name)), h("td", { class: "num" }, fmtCount(k.count)), usCell(k.us))))));
  } else {
    el.appendChild(h("p", { class: "hint" }, d.kernelScope === "layer"
      ? "No GPU kernels in this layer (a CPU trace)."
      : "No kernels recorded in this layer's sampled call (a CPU trace, or its kernels ran in a CUDA/HIP graph)."));
  }
  // The Reading of its layer type × implementation, as the report gives it for the layer's sampled call.
  if (d.sampleId !== null && ctx.target) {
    const slot = h("div", { "data-testid": "layer-reading" }, h("p", { class: "hint" }, "loading the reading…"));
    el.appendChild(slot);
    untilReady(() => api.call(ctx.target!, d.sampleId!), () => undefined, ctx.alive).then((sample) => {
      if (!sample || !ctx.alive()) return;
      slot.replaceChildren(readingPanel(sample.reading, sample.events || []));
    }, (e: Error) => slot.replaceChildren(h("p", { class: "hint err" }, `cannot load the reading: ${e.message}`)));
  }
  return el;
}

function fact(k: string, v: string): HTMLElement {
  return h("span", { class: "fact" }, h("span", { class: "fact-k" }, k), h("span", { class: "fact-v" }, v));
}

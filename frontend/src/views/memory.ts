// The Memory view: live memory over the profiled window with attention's stages shaded, the peak
// marked and explained, per-layer and per-stage tables; plus the overlay that Compare shows and
// the memory chart that Scaling shows.

import { api, untilReady } from "../api";
import { makeChart, tip } from "../charts";
import { h } from "../dom";
import { fmtBytes, fmtCount, fmtShare, niceByteStep } from "../format";
import { attributionLine, layerStagesText, memoryModel, memoryScaling, overlayModel, sectionOf } from "../memory_model";
import type { MemorySection } from "../memory_types";
import type { MemoryDoc } from "../route_types";
import { MEMORY_COLOR, runColors, seriesStyle } from "../colors";
import { stageLabel } from "../model";
import { defaultTarget } from "../runs_model";
import { stageColor } from "../colors";
import type { Report } from "../types";
import { badge, stageChip } from "./common";
import type { Ctx, Target } from "./context";

const POINTS = 1500;

async function fetchMemory(ctx: Ctx, into: HTMLElement, t: Target): Promise<MemoryDoc | null> {
  const box = h("div", { class: "notice notice-loading", "data-state": "loading", role: "status" },
    h("div", { class: "notice-title" }, `Analysing ${t.run}…`));
  into.appendChild(box);
  try {
    return await untilReady(() => api.memory(t, POINTS), () => {}, ctx.alive);
  } catch (e) {
    into.appendChild(h("div", { class: "notice notice-error", "data-state": "error", role: "alert" },
      h("div", { class: "notice-title" }, `Cannot load the memory of ${t.run}`), h("div", { class: "notice-detail" }, (e as Error).message)));
    return null;
  } finally {
    box.remove();
  }
}

export async function memoryView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const el = h("section", { class: "view view-memory", "data-view": "memory" });
  root.appendChild(el);
  el.appendChild(h("h2", null, "Memory"));
  if (!ctx.target) return;
  const doc = await fetchMemory(ctx, el, ctx.target);
  if (!doc || !ctx.alive()) return;
  const mem = sectionOf(doc);
  if (!mem) {
    el.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status", "data-testid": "memory-none" },
      h("div", { class: "notice-title" }, "No memory recorded in this trace"),
      h("div", { class: "notice-detail" }, doc.note || "Profile with profile_memory=True or tb_attn_plugin.profile(..., memory=True).")));
    return;
  }
  drawSection(ctx, el, mem, "memory");
  if (mem.snapshot_section) {
    el.appendChild(h("h3", null, "CUDA memory snapshot beside this trace"));
    drawSection(ctx, el, mem.snapshot_section, "memory-snapshot");
  }
}

function drawSection(ctx: Ctx, el: HTMLElement, mem: MemorySection, id: string): void {
  const m = memoryModel(mem);
  el.appendChild(h("div", { class: "headlines", "data-testid": `${id}-headline` },
    h("div", { class: "headline", "data-testid": `${id}-explanation`, "data-peak-bytes": String(mem.peak_bytes) },
      m.peak ? m.peak.explanation[0].toUpperCase() + m.peak.explanation.slice(1) : "No allocations recorded"),
    h("div", { class: "hint" },
      `${mem.source === "snapshot" ? "CUDA allocator snapshot" : "profiler memory events"} on ${mem.device}: `
      + `${fmtCount(mem.events)} allocation events (${fmtCount(mem.curve.points_total)} drawn as ${fmtCount(m.points.length)} points, every peak kept); `
      + `score-matrix blocks are allocations of exactly B·H·Lq·Lk·itemsize bytes.`)));
  const how = attributionLine(mem);
  if (how) el.appendChild(h("p", { class: "hint", "data-testid": `${id}-attribution`, "data-by": mem.attribution!.by }, how));
  const chartEl = h("div", { class: "chart chart-tall", "data-chart": id });
  el.appendChild(chartEl);
  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    const shadeByStage = new Map<string, [Record<string, unknown>, Record<string, unknown>][]>();
    for (const b of m.bands) {
      const list = shadeByStage.get(b.stage) || [];
      list.push([{ xAxis: b.start, name: b.label, itemStyle: { color: b.color, opacity: b.pass === "bwd" ? 0.12 : 0.22 } }, { xAxis: b.end }]);
      shadeByStage.set(b.stage, list);
    }
    const series: Record<string, unknown>[] = [{
      type: "line", name: "allocated", showSymbol: false, step: "end", data: m.points, lineStyle: { width: 1.5, color: MEMORY_COLOR.allocated },
      itemStyle: { color: MEMORY_COLOR.allocated },
      markPoint: m.peak ? {
        symbol: "pin", symbolSize: 44, itemStyle: { color: MEMORY_COLOR.peak },
        label: { formatter: () => fmtBytes(m.peak!.bytes), fontSize: 10 },
        data: [{ coord: [m.peak.t, m.peak.bytes], name: "peak" }],
      } : undefined,
    }];
    if (m.reserved) series.push({ type: "line", name: "reserved", showSymbol: false, step: "end", data: m.reserved,
      lineStyle: { width: 1, type: "dashed", color: MEMORY_COLOR.reserved }, itemStyle: { color: MEMORY_COLOR.reserved } });
    // One empty series per stage carries its shading, so the legend names the colours.
    for (const [stage, areas] of shadeByStage) {
      series.push({ type: "line", name: stageLabel(stage), data: [], itemStyle: { color: stageColor(stage) },
        markArea: { silent: true, label: { show: false }, data: areas } });
    }
    makeChart(chartEl, {
      grid: { left: 80, right: 30, top: 50, bottom: 70 },
      legend: { top: 0, type: "scroll" },
      tooltip: {
        trigger: "axis",
        formatter: (ps: { value: [number, number]; seriesName: string }[]) => {
          const p = ps.find((x) => x.seriesName === "allocated") || ps[0];
          if (!p) return "";
          const band = m.bands.filter((b) => b.start <= p.value[0] && p.value[0] <= b.end).pop();
          return tip(`${p.value[0].toFixed(3)} ms`, [["allocated", fmtBytes(p.value[1])],
            ...(band ? [["in", band.label] as [string, string]] : [])]);
        },
      },
      dataZoom: [{ type: "inside" }, { type: "slider", height: 18, bottom: 8 }],
      xAxis: { type: "value", name: mem.time_basis === "index" ? "entry" : "ms", nameLocation: "middle", nameGap: 26, scale: true },
      // Binary steps (1, 2, 4, 8 of a unit): ticks at 4 / 8 / 12 MiB, not ECharts' decimal 4.8 / 9.5 / 14.3 MiB.
      yAxis: { type: "value", name: "bytes live", interval: niceByteStep(Math.max(0, ...m.points.map((q) => q[1]), ...(m.reserved || []).map((q) => q[1]))),
        axisLabel: { formatter: (v: number) => fmtBytes(v) } },
      series,
    });
  });

  const p = mem.peak;
  if (p) {
    const frames = p.live.some((r) => !!r.frame);
    el.appendChild(h("h3", null, "Live at the peak"));
    el.appendChild(h("table", { class: "grid", "data-testid": `${id}-live` },
      h("thead", null, h("tr", null, ...["Layer", "Stage", "Score matrix", "Bytes", "Blocks", "Largest"]
        .concat(frames ? ["Allocated at"] : []) // profiler events carry no stack: no column of blanks
        .map((c, i) => h("th", { class: i >= 3 && i <= 5 ? "num" : null }, c)))),
      h("tbody", null, ...p.live.map((r) => h("tr", null,
        h("td", null, r.layer ?? "outside attention"), h("td", null, r.stage ? stageChip(r.stage, r.pass ?? undefined) : "—"),
        h("td", null, r.score_matrix ? "yes" : ""), h("td", { class: "num", "data-bytes": String(r.bytes) }, fmtBytes(r.bytes)),
        h("td", { class: "num" }, fmtCount(r.blocks)), h("td", { class: "num" }, fmtBytes(r.largest_block)),
        frames ? h("td", null, r.stack?.length
          ? h("details", null, h("summary", null, r.frame ?? ""), h("pre", { class: "stack" }, r.stack.join("\n")))
          : r.frame ?? "") : null))),
    ));
    const extra: string[] = [p.attention_share === null ? (mem.attribution?.reason || "attention: unknown")
      : `attention holds ${fmtShare(p.attention_share)} of the peak`];
    if (p.before_record_bytes) extra.push(`${fmtBytes(p.before_record_bytes)} were live before the record began`);
    if (p.reserved_minus_allocated !== null) extra.push(`reserved minus allocated at the peak: ${fmtBytes(p.reserved_minus_allocated)}`);
    el.appendChild(h("p", { class: "hint" }, extra.join("; ") + "."));
  }

  el.appendChild(h("h3", null, "By layer"));
  el.appendChild(h("table", { class: "grid", "data-testid": `${id}-layers` },
    h("thead", null, h("tr", null, ...["Layer", "Calls", "Peak growth / call", "Allocated", "Allocations", "Score matrix", "Score blocks", "By stage"]
      .map((c, i) => h("th", { class: i && i < 7 ? "num" : null }, c)))),
    h("tbody", null, ...m.layers.map((l) => h("tr", { "data-layer": l.layer },
      h("td", null, l.layer), h("td", { class: "num" }, fmtCount(l.calls)),
      h("td", { class: "num", "data-bytes": String(l.peak_growth_bytes) }, fmtBytes(l.peak_growth_bytes)),
      h("td", { class: "num" }, fmtBytes(l.bytes_allocated)), h("td", { class: "num" }, fmtCount(l.allocs)),
      h("td", { class: "num" }, l.score_bytes ? fmtBytes(l.score_bytes) : "—"),
      h("td", { class: "num", "data-blocks": String(l.score_matrix_blocks) }, fmtCount(l.score_matrix_blocks)),
      h("td", { "data-testid": "layer-stages" }, layerStagesText(l)))))));
  const ch = mem.churn;
  const seg = typeof ch.segment_allocs === "number"
    ? `; segments: ${ch.segment_allocs} allocated, ${ch.segment_frees} freed, ${ch.flush_retries} cache flushes, ${(ch.ooms as unknown[] | undefined)?.length ?? 0} OOMs` : "";
  el.appendChild(h("p", { class: "hint", "data-testid": `${id}-churn` },
    `Churn: ${fmtCount(ch.allocs)} allocations, ${fmtCount(ch.frees)} frees, ${fmtBytes(ch.bytes_allocated)} allocated in the window${seg}.`));
}

/** Compare: the picked runs' live memory curves on one axis, each from its own start. */
export async function memoryOverlay(ctx: Ctx, into: HTMLElement, runs: string[]): Promise<void> {
  const docs: { run: string; doc: MemoryDoc | null }[] = [];
  const status = h("div");
  into.appendChild(status);
  for (const run of runs) {
    const t = defaultTarget(ctx.runs, run);
    docs.push({ run, doc: t ? await fetchMemory(ctx, status, { run, worker: t.worker, span: t.span }) : null });
    if (!ctx.alive()) return;
  }
  const m = overlayModel(docs);
  if (!m.series.length) return;
  const colors = runColors(runs);
  into.appendChild(h("h3", null, "Memory over the profiled window"));
  into.appendChild(h("p", { class: "hint", "data-testid": "compare-memory-peaks" }, m.series.map((s) =>
    `${s.run}: peak ${fmtBytes(s.peak)}, score matrices ${fmtBytes(s.scoreBytes)}`).join(" · ")
    + (m.missing.length ? ` · no memory recorded in ${m.missing.join(", ")}` : "")));
  const chartEl = h("div", { class: "chart", "data-chart": "compare-memory" });
  into.appendChild(chartEl);
  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    makeChart(chartEl, {
      grid: { left: 80, right: 20, top: 40, bottom: 50 },
      legend: { top: 0 },
      tooltip: { trigger: "axis", formatter: (ps: { seriesName: string; value: [number, number] }[]) =>
        tip(`${(ps[0]?.value[0] ?? 0).toFixed(3)} ms`, ps.map((p) => [p.seriesName, fmtBytes(p.value[1])] as [string, string])) },
      xAxis: { type: "value", name: "ms from the first allocation", nameLocation: "middle", nameGap: 26 },
      yAxis: { type: "value", interval: niceByteStep(Math.max(0, ...m.series.map((s) => s.peak))),
        axisLabel: { formatter: (v: number) => fmtBytes(v) } },
      // Each run in its colour on the whole Compare page: by its place among the picked runs, not among
      // the runs that recorded memory (a run without memory would shift every later run's colour).
      series: m.series.map((s) => ({ type: "line", name: s.run, showSymbol: false, step: "end", data: s.points,
        itemStyle: { color: colors.get(s.run) }, lineStyle: { color: colors.get(s.run) } })),
    });
  });
}

/** Scaling: attention's memory (largest peak growth of one call) against sequence length, with its exponent. */
export function memoryScalingChart(ctx: Ctx, into: HTMLElement, items: { run: string; report: Report }[], groups: string[]): void {
  const m = memoryScaling(items);
  if (!m.series.some((s) => s.points.length)) return;
  into.appendChild(h("h3", null, "Attention memory per call (peak growth while it runs)"));
  const chartEl = h("div", { class: "chart", "data-chart": "scaling-peak-memory" });
  into.appendChild(chartEl);
  into.appendChild(h("ul", { class: "exponents", "data-testid": "scaling-memory-exponents" }, ...m.series.map((s) => h("li", { "data-impl": s.implementation },
    badge(s.implementation), ` ${s.label}:`, s.exponent === null ? " one length only" : ` memory grows as L^${s.exponent.toFixed(2)}`))));
  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    makeChart(chartEl, {
      grid: { left: 80, right: 20, top: 40, bottom: 50 },
      legend: { top: 0 },
      tooltip: { trigger: "item", formatter: (p: { seriesName: string; value: [number, number, string]; color: string }) =>
        tip(p.value[2], [["implementation", p.seriesName], ["sequence length", fmtCount(p.value[0])], ["peak growth", fmtBytes(p.value[1])]], p.color) },
      xAxis: { type: "log", logBase: 2, name: "sequence length", nameLocation: "middle", nameGap: 28 },
      yAxis: { type: "log", logBase: 4, axisLabel: { formatter: (v: number) => fmtBytes(v) } },
      series: m.series.map((s) => ({ s, style: seriesStyle(s.implementation, s.group, groups) })).map(({ s, style }) => ({
        type: "line", name: s.label, symbolSize: 8, symbol: style.symbol, itemStyle: { color: style.color },
        lineStyle: { type: style.line, color: style.color }, data: s.points.map((p) => [p.seqLen, p.growth, p.run]) })),
    });
  });
}

// Apache ECharts, tree-shaken: only the chart types and components the views use, canvas renderer.
// Tooltips are built as DOM nodes with textContent, so a trace's names never become markup.

import * as echarts from "echarts/core";
import { BarChart, CustomChart, LineChart, ScatterChart } from "echarts/charts";
import {
  DataZoomComponent, GridComponent, LegendComponent, MarkAreaComponent, MarkPointComponent, TooltipComponent,
} from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([BarChart, LineChart, CustomChart, ScatterChart, GridComponent, TooltipComponent, LegendComponent,
  DataZoomComponent, MarkAreaComponent, MarkPointComponent, CanvasRenderer]);

export { echarts };
export type ECharts = echarts.ECharts;
export type Option = echarts.EChartsCoreOption;

const live = new Set<{ chart: echarts.ECharts; ro: ResizeObserver | null }>();

type AxisOption = { name?: string; type?: string; max?: unknown; axisLabel?: { formatter?: unknown } };

/**
 * Each named axis's title and what one of its ticks reads ("1.23 ms"), as ``data-axes`` JSON on the
 * chart's element: the canvas holds neither as text, and a title must not state a unit its ticks
 * contradict (the browser test reads it).
 */
export function describeAxes(option: Option): { axis: string; name: string; tick: string }[] {
  const out: { axis: string; name: string; tick: string }[] = [];
  for (const axis of ["xAxis", "yAxis"] as const) {
    const given = (option as Record<string, unknown>)[axis] as AxisOption | AxisOption[] | undefined;
    for (const a of given == null ? [] : Array.isArray(given) ? given : [given]) {
      if (!a.name || a.type === "category") continue;
      const v = typeof a.max === "number" && a.max > 0 ? a.max : 1234;
      const f = a.axisLabel?.formatter;
      out.push({ axis: axis[0], name: a.name, tick: typeof f === "function" ? String(f(v, 0)) : String(v) });
    }
  }
  return out;
}

type SeriesOption = {
  name?: string; data?: unknown[]; itemStyle?: { color?: unknown }; lineStyle?: { color?: unknown };
  markArea?: { data?: unknown[] }; markPoint?: { data?: unknown[] };
};

/**
 * What a chart's legend lists: each named series, the colour it is drawn in (null when ECharts
 * would pick one from its own palette, not colors.ts) and whether it draws anything, as
 * ``data-legend`` JSON on the chart's element (the browser tests check that a legend lists only
 * what is drawn and that a name has one colour on a page).
 */
export function describeLegend(option: Option): { name: string; color: string | null; drawn: boolean }[] {
  const o = option as Record<string, unknown>;
  if (!o.legend) return [];
  const out: { name: string; color: string | null; drawn: boolean }[] = [];
  for (const s of (Array.isArray(o.series) ? o.series : []) as SeriesOption[]) {
    if (!s || typeof s.name !== "string") continue;
    const c = s.itemStyle?.color ?? s.lineStyle?.color;
    const drawn = !!(s.data?.length || s.markArea?.data?.length || s.markPoint?.data?.length);
    const seen = out.find((x) => x.name === s.name);
    if (seen) { seen.drawn ||= drawn; continue; } // one legend entry per name (a sweep's OOM marks share their line's)
    out.push({ name: s.name, color: typeof c === "string" ? c : null, drawn });
  }
  return out;
}

/** A chart in ``el``; disposed by disposeCharts() when the view changes. */
export function makeChart(el: HTMLElement, option: Option): echarts.ECharts {
  el.setAttribute("data-axes", JSON.stringify(describeAxes(option)));
  const legend = describeLegend(option);
  if (legend.length) el.setAttribute("data-legend", JSON.stringify(legend));
  const chart = echarts.init(el, null, { renderer: "canvas" });
  chart.setOption({ animation: false, textStyle: { fontFamily: "Roboto, Helvetica, Arial, sans-serif" }, ...option });
  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => chart.resize()) : null;
  ro?.observe(el);
  live.add({ chart, ro });
  return chart;
}

export function disposeCharts(): void {
  for (const c of live) {
    c.ro?.disconnect();
    c.chart.dispose();
  }
  live.clear();
}

/** A tooltip body: a bold title line, then "label: value" lines, all as text nodes. */
export function tip(title: string, lines: [string, string][], color?: string): HTMLElement {
  const box = document.createElement("div");
  box.className = "attn-tip";
  const t = document.createElement("div");
  t.className = "attn-tip-title";
  if (color) {
    const dot = document.createElement("span");
    dot.className = "attn-dot";
    dot.style.background = color;
    t.appendChild(dot);
  }
  t.appendChild(document.createTextNode(title));
  box.appendChild(t);
  for (const [k, v] of lines) {
    const row = document.createElement("div");
    const b = document.createElement("span");
    b.className = "attn-tip-key";
    b.textContent = k + ": ";
    row.appendChild(b);
    row.appendChild(document.createTextNode(v));
    box.appendChild(row);
  }
  return box;
}

import { api, untilReady } from "../api";
import { echarts, makeChart, tip } from "../charts";
import { h } from "../dom";
import { fmtUs, shortKernelName } from "../format";
import { stageColor, stageLabel, timelineModel } from "../model";
import type { CallSample } from "../types";
import { badge, stageChip, usCell } from "./common";
import type { Ctx } from "./context";

export async function timelineView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const report = await ctx.report(root);
  if (!report) return;
  const el = h("section", { class: "view view-timeline", "data-view": "timeline" });
  root.appendChild(el);
  el.appendChild(h("h2", null, "One call's timeline"));
  const samples = report.call_samples || [];
  if (!samples.length) {
    el.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status" },
      h("div", { class: "notice-title" }, "No attention call to show"),
      h("div", { class: "notice-detail" }, "This trace has no attention calls, so there is no sampled call.")));
    return;
  }
  const id = ctx.state.call ?? samples[0].id;
  const select = h("select", { "aria-label": "attention call", "data-testid": "call-select" },
    ...samples.map((s) => h("option", { value: String(s.id), selected: s.id === id },
      `#${s.id} ${s.layer ?? ""} · ${s.implementation ?? ""} · ${fmtUs(s.dur_us)}`)));
  select.addEventListener("change", () => ctx.set({ call: Number(select.value) }));
  el.appendChild(h("div", { class: "controls" }, h("label", null, "Call (the first of each layer) ", select)));

  const slot = h("div");
  el.appendChild(slot);
  let sample: CallSample | null;
  try {
    sample = await untilReady(() => api.call(ctx.target!, id), () => undefined, ctx.alive);
  } catch (e) {
    slot.appendChild(h("div", { class: "notice notice-error", "data-state": "error", role: "alert" },
      h("div", { class: "notice-title" }, "Cannot load this call"), h("div", { class: "notice-detail" }, (e as Error).message)));
    return;
  }
  if (!sample || !ctx.alive()) return;
  const m = timelineModel(sample);
  slot.appendChild(h("div", { class: "facts" },
    h("span", { class: "fact" }, h("span", { class: "fact-k" }, "layer"), h("span", { class: "fact-v" }, sample.layer ?? "—")),
    badge(sample.implementation || "unknown"),
    h("span", { class: "fact" }, h("span", { class: "fact-k" }, "step"), h("span", { class: "fact-v" }, String(sample.step ?? "—"))),
    h("span", { class: "fact" }, h("span", { class: "fact-k" }, "duration"), h("span", { class: "fact-v", "data-us": String(sample.dur_us ?? "") }, fmtUs(sample.dur_us))),
    sample.truncated ? h("span", { class: "hint" }, "events truncated") : null));
  slot.appendChild(h("div", { class: "legend-row" }, ...m.stages.map((s) => stageChip(s))));
  const chartEl = h("div", { class: "chart chart-timeline", "data-chart": "timeline" });
  chartEl.style.height = `${Math.max(180, 60 + m.lanes.length * 26)}px`;
  slot.appendChild(chartEl);

  requestAnimationFrame(() => {
    if (!ctx.alive()) return;
    makeChart(chartEl, {
      grid: { left: 70, right: 20, top: 10, bottom: 50 },
      tooltip: {
        trigger: "item",
        formatter: (p: { dataIndex: number }) => {
          const it = m.items[p.dataIndex];
          return tip(it.name, [["kind", it.kind === "kernel" ? "GPU kernel" : "CPU op"], ["stage", stageLabel(it.stage) + (it.pass === "bwd" ? " (bwd)" : "")],
            ["start", `+${fmtUs(it.start)}`], ["duration", fmtUs(it.dur)]], stageColor(it.stage));
        },
      },
      xAxis: { type: "value", min: 0, max: m.span || 1, axisLabel: { formatter: (v: number) => fmtUs(v) }, name: "since call start", nameLocation: "middle", nameGap: 30 },
      yAxis: { type: "category", data: m.lanes, inverse: true },
      dataZoom: [{ type: "inside", filterMode: "weakFilter" }, { type: "slider", height: 14, bottom: 2, filterMode: "weakFilter" }],
      series: [{
        type: "custom",
        encode: { x: [1, 2], y: 0 },
        data: m.items.map((it) => [it.lane, it.start, it.start + it.dur]),
        renderItem: (params: unknown, api: {
          value: (i: number) => number; coord: (v: number[]) => number[]; size: (v: number[]) => number[]; style: () => object;
        }) => {
          const it = m.items[(params as { dataIndex: number }).dataIndex];
          const start = api.coord([api.value(1), api.value(0)]);
          const end = api.coord([api.value(2), api.value(0)]);
          const height = api.size([0, 1])[1] * 0.7;
          const shape = echarts.graphic.clipRectByRect(
            { x: start[0], y: start[1] - height / 2, width: Math.max(1, end[0] - start[0]), height },
            (params as { coordSys: { x: number; y: number; width: number; height: number } }).coordSys,
          );
          return shape && {
            type: "rect", shape,
            style: { fill: stageColor(it.stage), stroke: it.kind === "kernel" ? "#333" : "rgba(0,0,0,0.15)", lineWidth: it.kind === "kernel" ? 1 : 0.5 },
          };
        },
      }],
    });
  });

  slot.appendChild(h("details", { class: "numbers" }, h("summary", null, `Events (${m.items.length})`),
    h("table", { class: "grid", "data-testid": "timeline-table" },
      h("thead", null, h("tr", null, ...["Lane", "Event", "Stage", "Start", "Duration"].map((c, i) => h("th", { class: i >= 3 ? "num" : null }, c)))),
      h("tbody", null, ...[...m.items].sort((a, b) => a.start - b.start || a.lane - b.lane).map((it) => h("tr", { "data-kind": it.kind },
        h("td", null, m.lanes[it.lane]), h("td", { class: "kcell", title: it.name }, it.kind === "kernel" ? shortKernelName(it.name) : it.name),
        h("td", null, stageChip(it.stage, it.pass)), usCell(it.start), usCell(it.dur)))))));
}

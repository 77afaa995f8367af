import { api, untilReady } from "../api";
import { echarts, makeChart, tip } from "../charts";
import { h } from "../dom";
import { distinctShortNames, fmtUs, usAxis } from "../format";
import { stageLabel } from "../model";
import { stageColor } from "../colors";
import { callChoices, timelineModel, type TimelineSegment } from "../timeline_model";
import type { CallAnswer } from "../route_types";
import type { CallEvent } from "../types";
import { badge, stageChip, usCell } from "./common";
import type { Ctx } from "./context";
import { readingPanel } from "./reading";

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
  const id = samples.some((s) => s.id === ctx.state.call) ? ctx.state.call! : samples[0].id;
  const current = samples.find((s) => s.id === id)!;
  const { steps, calls } = callChoices(samples, current.step ?? 0);
  const stepSelect = h("select", { "aria-label": "profiler step", "data-testid": "step-select", disabled: steps.length < 2 },
    ...steps.map((st) => h("option", { value: String(st), selected: st === (current.step ?? 0) }, st < 0 ? "no step marked" : `step ${st}`)));
  stepSelect.addEventListener("change", () => {
    const first = callChoices(samples, Number(stepSelect.value)).calls[0];
    if (first) ctx.set({ call: first.id });
  });
  const select = h("select", { "aria-label": "attention call", "data-testid": "call-select" },
    ...calls.map((s) => h("option", { value: String(s.id), selected: s.id === id },
      `#${s.id} ${s.layer ?? ""} · ${s.implementation ?? ""}`)));
  select.addEventListener("change", () => ctx.set({ call: Number(select.value) }));
  el.appendChild(h("div", { class: "controls" }, h("label", null, "Step ", stepSelect), h("label", null, "Call ", select),
    h("span", { class: "hint" }, `${samples.length} sampled call${samples.length === 1 ? "" : "s"} in this trace`)));

  const slot = h("div");
  el.appendChild(slot);
  let sample: CallAnswer | null;
  try {
    sample = await untilReady(() => api.call(ctx.target!, id), () => undefined, ctx.alive);
  } catch (e) {
    slot.appendChild(h("div", { class: "notice notice-error", "data-state": "error", role: "alert" },
      h("div", { class: "notice-title" }, "Cannot load this call"), h("div", { class: "notice-detail" }, (e as Error).message)));
    return;
  }
  if (!sample || !ctx.alive()) return;
  const m = timelineModel(sample);
  const split = m.gapUs !== null;
  const busy = (m.fwdUs ?? 0) + (m.bwdUs ?? 0);
  slot.appendChild(h("div", { class: "facts" },
    h("span", { class: "fact" }, h("span", { class: "fact-k" }, "layer"), h("span", { class: "fact-v" }, sample.layer ?? "—")),
    badge(sample.implementation || "unknown"),
    h("span", { class: "fact" }, h("span", { class: "fact-k" }, "step"), h("span", { class: "fact-v" }, String(sample.step ?? "—"))),
    h("span", { class: "fact" }, h("span", { class: "fact-k" }, split ? "forward + backward" : "duration"),
      h("span", { class: "fact-v", "data-us": String(split ? busy : sample.dur_us ?? ""), "data-testid": "call-duration" },
        split ? `${fmtUs(m.fwdUs)} + ${fmtUs(m.bwdUs)}` : fmtUs(sample.dur_us))),
    split ? h("span", { class: "fact", "data-testid": "call-gap" }, h("span", { class: "fact-k" }, "backward starts"),
      h("span", { class: "fact-v", "data-us": String(m.gapUs) }, `${fmtUs(m.gapUs)} after the forward ends`)) : null,
    sample.truncated ? h("span", { class: "hint" }, "events truncated") : null));
  slot.appendChild(h("div", { class: "legend-row" }, ...m.stages.map((s) => stageChip(s))));
  const short = distinctShortNames((sample.events || []).filter((e) => e.kind === "kernel").map((e) => e.name));
  const hit = new Set<CallEvent>(); // the events of the claim picked in the Reading panel
  const redraw: (() => void)[] = [];
  for (const seg of m.segments) {
    if (split) slot.appendChild(h("h3", { "data-segment": seg.pass ?? "" }, seg.pass === "bwd" ? "Backward" : "Forward"));
    const chartEl = h("div", { class: "chart chart-timeline", "data-chart": "timeline", "data-segment": seg.pass ?? "call" });
    chartEl.style.height = `${Math.max(180, 60 + seg.lanes.length * 26)}px`;
    slot.appendChild(chartEl);
    requestAnimationFrame(() => { if (ctx.alive()) redraw.push(drawSegment(chartEl, seg, split, hit)); });
  }

  const rows = m.segments.flatMap((seg) => seg.items.map((it) => ({ seg, it })))
    .sort((a, b) => a.seg.offset + a.it.start - (b.seg.offset + b.it.start) || a.it.lane - b.it.lane);
  slot.appendChild(h("details", { class: "numbers" }, h("summary", null, `Events (${rows.length})`),
    h("table", { class: "grid", "data-testid": "timeline-table" },
      h("thead", null, h("tr", null, ...["Row (thread · depth, or GPU stream)", "Event", "Stage", "Start", "Duration"]
        .map((c, i) => h("th", { class: i >= 3 ? "num" : null }, c)))),
      h("tbody", null, ...rows.map(({ seg, it }) => h("tr", {
        "data-kind": it.kind, "data-lane": seg.lanes[it.lane], "data-testid": "timeline-event",
        "data-correlation": it.event.correlation, "data-ts": it.event.ts_us,
      },
      h("td", null, seg.lanes[it.lane]),
      h("td", { class: "kcell", title: it.name }, it.kind === "kernel" ? short.get(it.name) ?? it.name : it.name),
      h("td", null, stageChip(it.stage, it.pass)), usCell(seg.offset + it.start), usCell(it.dur)))))));
  const table = slot.querySelector("details.numbers") as HTMLDetailsElement;
  const trs = [...table.querySelectorAll<HTMLElement>('[data-testid="timeline-event"]')];
  slot.appendChild(readingPanel(sample.reading, sample.events || [], (events) => {
    hit.clear();
    for (const e of events || []) hit.add(e);
    rows.forEach(({ it }, i) => trs[i].toggleAttribute("data-claim-hit", hit.has(it.event)));
    if (hit.size) table.open = true; // the highlighted rows are the answer: show them
    for (const r of redraw) r();
  }));
}

function drawSegment(chartEl: HTMLElement, seg: TimelineSegment, split: boolean, hit: Set<CallEvent>): () => void {
  const since = split ? `since the ${seg.pass === "bwd" ? "backward" : "forward"} starts` : "since the call starts";
  const data = () => seg.items.map((it) => [it.lane, it.start, it.start + it.dur]);
  const chart = makeChart(chartEl, {
    grid: { left: 170, right: 20, top: 10, bottom: 50 },
    tooltip: {
      trigger: "item",
      formatter: (p: { dataIndex: number }) => {
        const it = seg.items[p.dataIndex];
        return tip(it.name, [["row", seg.lanes[it.lane]], ["kind", it.kind === "kernel" ? "GPU kernel" : "CPU op"],
          ["stage", stageLabel(it.stage) + (it.pass === "bwd" ? " (bwd)" : "")],
          ["start", `+${fmtUs(it.start)}`], ["duration", fmtUs(it.dur)]], stageColor(it.stage));
      },
    },
    // The ticks carry their unit (µs, ms, s): the title names only what is measured.
    xAxis: { type: "value", min: 0, max: seg.span || 1, axisLabel: { formatter: usAxis(seg.span || 1) }, name: `time ${since}`,
      nameLocation: "middle", nameGap: 30 },
    yAxis: { type: "category", data: seg.lanes, inverse: true, name: "", axisLabel: { fontSize: 10 } },
    dataZoom: [{ type: "inside", filterMode: "weakFilter" }, { type: "slider", height: 14, bottom: 2, filterMode: "weakFilter" }],
    series: [{
      type: "custom",
      encode: { x: [1, 2], y: 0 },
      data: data(),
      renderItem: (params: unknown, api: {
        value: (i: number) => number; coord: (v: number[]) => number[]; size: (v: number[]) => number[]; style: () => object;
      }) => {
        const it = seg.items[(params as { dataIndex: number }).dataIndex];
        const start = api.coord([api.value(1), api.value(0)]);
        const end = api.coord([api.value(2), api.value(0)]);
        const height = api.size([0, 1])[1] * 0.7;
        const shape = echarts.graphic.clipRectByRect(
          { x: start[0], y: start[1] - height / 2, width: Math.max(1, end[0] - start[0]), height },
          (params as { coordSys: { x: number; y: number; width: number; height: number } }).coordSys,
        );
        return shape && {
          type: "rect", shape,
          style: hit.has(it.event) ? { fill: stageColor(it.stage), stroke: "#d50000", lineWidth: 3 }
            : { fill: stageColor(it.stage), stroke: it.kind === "kernel" ? "#333" : "rgba(0,0,0,0.15)", lineWidth: it.kind === "kernel" ? 1 : 0.5,
              opacity: hit.size ? 0.35 : 1 },
        };
      },
    }],
  });
  // re-rendered with the same data: renderItem reads ``hit`` again
  return () => chart.setOption({ series: [{ data: data() }] });
}

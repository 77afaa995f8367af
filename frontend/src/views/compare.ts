import { splitSweepRuns } from "../sweep_runs";
import { api, untilReady } from "../api";
import { makeChart, tip } from "../charts";
import { h } from "../dom";
import { distinctShortNames, fmtCount, fmtDeltaPct, fmtDeltaUs, fmtShare, fmtUs, usAxis } from "../format";
import { runColors } from "../colors";
import { compareModel } from "../compare_model";
import { PART_LABEL } from "../overview_model";
import type { CompareDoc } from "../route_types";
import { badge, basisWord, kernelName, stageChip, usCell } from "./common";
import type { Ctx } from "./context";
import { memoryOverlay } from "./memory";
import { rooflineCompareSection } from "./roofline";

/** The backend compares at most this many runs at once (plugin.py MAX_COMPARE). */
export const MAX_COMPARE = 8;


const FIGURE_LABEL: Record<string, string> = {
  gpu_span_us: "GPU span", busy_us: "busy", communication_us: "communication (all)", ...PART_LABEL,
};

/** The step beside attention: span, busy and each part of the step per run, and each run's limit. */
function stepDeltas(steps: NonNullable<CompareDoc["steps"]>, runs: string[]): HTMLElement {
  const box = h("div", { "data-testid": "compare-steps" });
  box.appendChild(h("h3", null, "The step (GPU span and its parts)"));
  box.appendChild(h("table", { class: "grid" },
    h("thead", null, h("tr", null, h("th", null, "Figure"), ...runs.map((r) => h("th", { class: "num" }, r)),
      h("th", { class: "num" }, "Δ"), h("th", { class: "num" }, "Δ%"))),
    h("tbody", null, ...steps.rows.map((r) => h("tr", { "data-figure": r.figure },
      h("td", null, FIGURE_LABEL[r.figure] ?? r.figure),
      ...r.values.map((v) => h("td", { class: "num", "data-us": String(v) }, v === null ? "unknown" : fmtUs(v))),
      h("td", { class: "num", "data-us": String(r.delta_us) }, r.delta_us === null ? "—" : fmtDeltaUs(r.delta_us)),
      h("td", { class: "num" }, r.delta_us === null ? "—" : fmtDeltaPct(r.delta_pct)))))));
  box.appendChild(h("ul", { class: "step-notes", "data-testid": "compare-limits" },
    ...runs.filter((r) => steps.limits[r]).map((r) => h("li", { "data-run": r }, `${r}: ${steps.limits[r]}`))));
  return box;
}

export async function compareView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const el = h("section", { class: "view view-compare", "data-view": "compare" });
  root.appendChild(el);
  el.appendChild(h("h2", null, "Compare runs"));
  el.appendChild(runPicker(ctx, "Compare: the first run picked is the baseline; deltas are last minus first."));
  const picked = ctx.state.compare;
  if (picked.length < 2) {
    el.appendChild(h("div", { class: "notice notice-info", "data-state": "info", role: "status" },
      h("div", { class: "notice-title" }, "Pick two or more runs to compare")));
    return;
  }
  if (picked.length > MAX_COMPARE) {
    el.appendChild(h("div", { class: "notice notice-info", "data-state": "info", role: "status" },
      h("div", { class: "notice-title" }, `Compare shows at most ${MAX_COMPARE} runs at a time; ${picked.length} are picked`),
      h("div", { class: "notice-detail" }, "Untick some to compare them. The Scaling view uses every run picked here.")));
    return;
  }
  const out = h("div", { class: "compare-out" });
  el.appendChild(out);
  const status = h("div");
  out.appendChild(status);
  let doc: CompareDoc | null;
  try {
    doc = await untilReady(() => api.compare(picked), (l) => {
      while (status.firstChild) status.removeChild(status.firstChild);
      status.appendChild(h("div", { class: "notice notice-loading", "data-state": "loading", role: "status" },
        h("div", { class: "notice-title" }, "Analysing traces…"),
        h("div", { class: "notice-detail" }, `waiting for ${(l.waitingFor || []).join(", ") || "the backend"}`)));
    }, ctx.alive);
  } catch (e) {
    while (status.firstChild) status.removeChild(status.firstChild);
    status.appendChild(h("div", { class: "notice notice-error", "data-state": "error", role: "alert" },
      h("div", { class: "notice-title" }, "Cannot compare these runs"), h("div", { class: "notice-detail" }, (e as Error).message)));
    return;
  }
  if (!doc || !ctx.alive()) return;
  out.removeChild(status);
  const m = compareModel(doc);
  const colors = runColors(m.runs);

  out.appendChild(h("div", { class: "headlines", "data-testid": "compare-headlines" },
    ...m.headlines.map((line) => h("div", { class: "headline" }, line)),
    m.backendSummary ? h("div", { class: "backend-summary" }, m.backendSummary) : null,
    h("div", { class: "hint" }, `All numbers are ${basisWord(m.basis)}${doc.time_basis_note ? ` (${doc.time_basis_note})` : ""}.`)));

  out.appendChild(h("table", { class: "grid", "data-testid": "compare-totals" },
    h("thead", null, h("tr", null, h("th", null, "Run"), h("th", { class: "num" }, "Attention"), h("th", { class: "num" }, "Share"),
      h("th", { class: "num" }, "Calls"), h("th", null, "Implementations"))),
    h("tbody", null, ...m.totals.map((t) => h("tr", { "data-run": t.run },
      h("td", null, h("span", { class: "attn-dot", "data-color": colors.get(t.run) ?? "", style: `background:${colors.get(t.run)}` }), t.run),
      usCell(t.us), h("td", { class: "num" }, fmtShare(t.share)), h("td", { class: "num" }, fmtCount(t.calls)),
      h("td", null, ...t.implementations.map((impl) => badge(impl))))))));

  if (doc.steps?.rows.length) out.appendChild(stepDeltas(doc.steps, m.runs));

  const roofBox = h("div");
  out.appendChild(roofBox);

  if (m.chart.categories.length) {
    out.appendChild(h("h3", null, "Stages side by side"));
    const chartEl = h("div", { class: "chart", "data-chart": "compare" });
    out.appendChild(chartEl);
    requestAnimationFrame(() => {
      if (!ctx.alive()) return;
      makeChart(chartEl, {
        grid: { left: 70, right: 20, top: 40, bottom: 80 },
        legend: { top: 0, type: "scroll" },
        tooltip: {
          trigger: "axis", axisPointer: { type: "shadow" },
          formatter: (ps: { axisValue: string; seriesName: string; value: number; color: string }[]) =>
            tip(ps[0]?.axisValue ?? "", ps.map((p) => [p.seriesName, fmtUs(p.value)] as [string, string])),
        },
        xAxis: { type: "category", data: m.chart.categories, axisLabel: { rotate: 30, interval: 0 } },
        yAxis: { type: "value", name: basisWord(m.basis),
          axisLabel: { formatter: usAxis(Math.max(0, ...m.chart.series.flatMap((s) => s.values))) } },
        series: m.chart.series.map((s) => ({
          type: "bar", name: s.run, data: s.values, itemStyle: { color: colors.get(s.run) },
        })),
      });
    });
  }

  const runHeads = () => m.runs.map((r) => h("th", { class: "num" }, r));
  out.appendChild(h("h3", null, "What changed, largest first"));
  out.appendChild(h("table", { class: "grid", "data-testid": "compare-stages" },
    h("thead", null, h("tr", null, h("th", null, "Stage"), ...runHeads(), h("th", { class: "num" }, "Δ"), h("th", { class: "num" }, "Δ%"))),
    h("tbody", null, ...m.stageRows.map((r) => h("tr", { "data-stage": r.stage, "data-pass": r.pass },
      h("td", null, stageChip(r.stage, r.pass)), ...r.values.map((v) => usCell(v)),
      h("td", { class: `num ${r.delta < 0 ? "better" : r.delta > 0 ? "worse" : ""}`, "data-us": String(r.delta) }, fmtDeltaUs(r.delta)),
      h("td", { class: "num" }, fmtDeltaPct(r.pct)))))));

  if (m.layerRows.length) {
    out.appendChild(h("h3", null, "By layer type"));
    out.appendChild(h("table", { class: "grid", "data-testid": "compare-layers" },
      h("thead", null, h("tr", null, h("th", null, "Layer type"), ...runHeads(), h("th", { class: "num" }, "Δ"), h("th", { class: "num" }, "Δ%"))),
      h("tbody", null, ...m.layerRows.map((r) => h("tr", { "data-layer-type": r.layerType },
        h("td", null, r.layerType),
        ...r.values.map((v, i) => h("td", { class: "num", "data-us": String(v) }, fmtUs(v),
          r.implementations[i] ? badge(r.implementations[i] as string) : h("span", { class: "absent" }, " absent"))),
        h("td", { class: `num ${r.delta < 0 ? "better" : r.delta > 0 ? "worse" : ""}`, "data-us": String(r.delta) }, fmtDeltaUs(r.delta)),
        h("td", { class: "num" }, fmtDeltaPct(r.pct)))))));
  }

  out.appendChild(h("h3", null, "Kernels present in only one run"));
  out.appendChild(h("div", { class: "only-in", "data-testid": "compare-only-in" }, ...m.onlyIn.map((o) => h("div", { class: "only-in-run", "data-run": o.run },
    h("h4", null, `only in ${o.run}: ${fmtCount(o.count)} kernel${o.count === 1 ? "" : "s"}`),
    o.kernels.length ? h("table", { class: "grid" },
      h("tbody", null, ...onlyInRows(o.kernels.slice(0, 25))))
      : h("p", { class: "hint" }, "none"),
    o.kernels.length > 25 ? h("p", { class: "hint" }, `and ${o.count - 25} more`) : null))));
  await memoryOverlay(ctx, out, picked);
  await rooflineCompareSection(ctx, roofBox, doc);
}

/** Checkboxes over every run; the order of picking is kept (the first is the baseline). */
export function runPicker(ctx: Ctx, hint: string): HTMLElement {
  const picked = ctx.state.compare;
  const box = h("div", { class: "run-picker", "data-testid": "run-picker" }, h("div", { class: "hint" }, hint));
  const byName = new Map((ctx.runs.runs || []).map((r) => [r.run, r]));
  const { own, sweeps } = splitSweepRuns([...byName.keys()]);
  const ordered: (string | { sweep: string; cells: number })[] = [...own];
  for (const [sweep, cells] of sweeps) ordered.push({ sweep, cells: cells.length }, ...cells);
  for (const item of ordered) {
    if (typeof item !== "string") {
      box.appendChild(h("div", { class: "hint" }, `sweep ${item.sweep}: ${item.cells} profiled cell${item.cells === 1 ? "" : "s"}`));
      continue;
    }
    const r = byName.get(item)!;
    // A snapshot listed on its own has no attention to compare (the backend refuses it).
    if (r.workers.every((w) => w.spans.every((s) => s.summary?.kind === "memory_snapshot"))) continue;
    const i = picked.indexOf(r.run);
    const impls = [...new Set(r.workers.flatMap((w) => w.spans.flatMap((s) => s.summary?.implementations || [])))];
    const cb = h("input", { type: "checkbox", checked: i >= 0, "data-run": r.run, "aria-label": `compare ${r.run}` });
    cb.addEventListener("change", () => {
      const next = cb.checked ? [...picked.filter((x) => x !== r.run), r.run] : picked.filter((x) => x !== r.run);
      ctx.set({ compare: next });
    });
    box.appendChild(h("label", { class: "pick" + (i >= 0 ? " on" : "") }, cb,
      i >= 0 ? h("span", { class: "pick-order" }, i === 0 ? "baseline" : `#${i + 1}`) : null,
      h("span", { class: "pick-name" }, r.run),
      r.status === "loading" ? h("span", { class: "hint" }, " analysing…") : null,
      r.status === "error" ? h("span", { class: "hint err" }, " cannot be read") : null,
      ...impls.map((impl) => badge(impl))));
  }
  return box;
}

function onlyInRows(kernels: { name: string; stage: string; gpu_us: number; count: number | null }[]): HTMLElement[] {
  const short = distinctShortNames(kernels.map((k) => k.name));
  return kernels.map((k) => h("tr", null, h("td", null, stageChip(k.stage)),
    h("td", null, kernelName(k.name, short.get(k.name) ?? k.name)), h("td", { class: "num" }, fmtCount(k.count)), usCell(k.gpu_us)));
}

import { h } from "../dom";
import { distinctShortNames, fmtCount, fmtShare, fmtUs, occupancyText } from "../format";
import { kernelGroups, type KernelSort, type TableKernel } from "../kernels_model";
import { basisOf, stageLabel } from "../model";
import { STAGES } from "../tags";
import { kernelName, stageChip, usCell } from "./common";
import type { Ctx } from "./context";

// "Kernel" becomes "Op" for a CPU trace: what the table lists is then the CPU ops that ran.
const COLUMNS: { key: KernelSort; text: string; num: boolean }[] = [
  { key: "name", text: "Kernel", num: false },
  { key: "count", text: "Count", num: true },
  { key: "total", text: "Total", num: true },
  { key: "mean", text: "Mean", num: true },
  { key: "share", text: "Share of attention", num: true },
];

// Sorting is view-local (not worth a URL key); it survives re-renders within the page.
let sort: KernelSort = "total";
let desc = true;

export async function kernelsView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const report = await ctx.report(root);
  if (!report) return;
  const basis = basisOf(report);
  // Without GPU kernels, the CPU ops of attention are what ran: the same table over ops.
  // (a GPU trace whose attention ran no kernel shows its ops; one with no attention at all stays "Kernels")
  const useOps = basis === "cpu" || (!(report.kernels || []).length && (report.ops || []).length > 0);
  const rows: TableKernel[] = useOps
    ? (report.ops || []).map((o) => ({ name: o.name, stage: o.stage, pass: o.pass, count: o.count, gpu_us: o.cpu_us }))
    : report.kernels || [];
  const att = (useOps ? report.attention_cpu_us : report.attention_gpu_us) ?? 0;
  const what = useOps ? "CPU ops" : "GPU kernels";
  const unit = useOps ? "op" : "kernel";
  const short = distinctShortNames(rows.map((r) => r.name));
  // What each name says (fingerprint) and how full it keeps an SM (the first layer that ran it).
  const fingerprints = new Map(rows.filter((r) => r.fingerprint && r.fingerprint !== "unknown").map((r) => [r.name, r.fingerprint] as const));
  const occupancy = new Map<string, string>();
  for (const lay of report.layers || []) {
    for (const o of lay.occupancy || []) if (!occupancy.has(o.name) && o.reading) occupancy.set(o.name, occupancyText(o));
  }

  const el = h("section", { class: "view view-kernels", "data-view": "kernels" });
  root.appendChild(el);
  el.appendChild(h("h2", null, `${useOps ? "Ops" : "Kernels"} by stage `,
    rows.length ? h("span", { class: "sub" }, `${fmtCount(rows.length)} ${what} in attention, ${fmtUs(att)} in all`) : null));
  if (!rows.length) {
    el.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status" },
      h("div", { class: "notice-title" }, (report.layers || []).length ? `No ${what} inside attention calls` : "No attention found in this trace")));
    return;
  }

  const filterInput = h("input", {
    type: "search", placeholder: `filter by ${unit} name, stage or implementation`, value: ctx.state.filter,
    "aria-label": `filter ${unit}s`, "data-testid": "kernel-filter",
  });
  const stageSelect = h("select", { "aria-label": "stage", "data-testid": "kernel-stage" },
    h("option", { value: "" }, "all stages"),
    ...STAGES.filter((s) => rows.some((k) => (k.stage || "other") === s))
      .map((s) => h("option", { value: s, selected: ctx.state.stage === s }, stageLabel(s))));
  el.appendChild(h("div", { class: "controls" }, filterInput, stageSelect));
  const tableSlot = h("div");
  el.appendChild(tableSlot);

  const draw = () => {
    while (tableSlot.firstChild) tableSlot.removeChild(tableSlot.firstChild);
    const stage = stageSelect.value;
    const groups = kernelGroups(rows.filter((k) => !stage || (k.stage || "other") === stage),
      { filter: filterInput.value, sort, desc, attentionUs: att });
    if (!groups.length) {
      tableSlot.appendChild(h("div", { class: "notice notice-empty", "data-state": "empty", role: "status" },
        h("div", { class: "notice-title" }, `No ${what} match the filter`)));
      return;
    }
    const head = h("tr", null, h("th", null, "Stage"), ...COLUMNS.map((c) => h("th", {
      class: (c.num ? "num " : "") + "sortable" + (sort === c.key ? (desc ? " desc" : " asc") : ""),
      "data-sort": c.key, "aria-sort": sort === c.key ? (desc ? "descending" : "ascending") : "none", "data-column": c.key,
      onclick: () => {
        if (sort === c.key) desc = !desc;
        else { sort = c.key; desc = c.key !== "name"; }
        draw();
      },
    }, c.key === "name" && useOps ? "Op" : c.text)));
    const body = h("tbody");
    for (const g of groups) {
      body.appendChild(h("tr", { class: "group", "data-group": `${g.pass}:${g.stage}` },
        h("td", null, stageChip(g.stage, g.pass)), h("td", null, `${g.rows.length} ${useOps ? "op" : "kernel"}${g.rows.length === 1 ? "" : "s"}`),
        h("td", { class: "num" }, fmtCount(g.count)), usCell(g.total), h("td"),
        h("td", { class: "num" }, fmtShare(g.share))));
      for (const r of g.rows) {
        body.appendChild(h("tr", { class: "kernel", "data-kernel": r.name, "data-stage": r.stage, "data-pass": r.pass },
          h("td"), h("td", { class: "kcell" }, kernelName(r.name, short.get(r.name) ?? r.name),
            r.implementation ? h("span", { class: "impl-tag" }, r.implementation) : null,
            fingerprints.get(r.name) ? h("div", { class: "fingerprint", "data-testid": "fingerprint" }, fingerprints.get(r.name)) : null,
            occupancy.get(r.name) ? h("div", { class: "fingerprint", "data-testid": "occupancy" }, occupancy.get(r.name)) : null),
          h("td", { class: "num" }, fmtCount(r.count)), usCell(r.total), usCell(r.mean), h("td", { class: "num" }, fmtShare(r.share))));
      }
    }
    tableSlot.appendChild(h("table", { class: "grid kernels", "data-testid": "kernels-table" }, h("thead", null, head), body));
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  filterInput.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { draw(); ctx.set({ filter: filterInput.value }, false); }, 150);
  });
  stageSelect.addEventListener("change", () => { draw(); ctx.set({ stage: stageSelect.value || null }, false); });
  draw();
}

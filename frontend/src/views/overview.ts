// The Overview: attention in its step. The step's GPU span as one bar of parts that sum to it, the
// sentence saying what limits the step, attention's place, the host side, per-step spread and the
// serving phases; the view the tab opens on.

import { h } from "../dom";
import { fmtBytes, fmtCount, fmtShare, fmtTbs, fmtUs } from "../format";
import { overviewModel, spread, type PhaseModel } from "../overview_model";
import type { Report } from "../types";
import type { Ctx } from "./context";
import { usCell } from "./common";

export async function overviewView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const report = await ctx.report(root);
  if (!report) return;
  root.appendChild(overviewPanel(report));
}

export function overviewPanel(report: Report): HTMLElement {
  const m = overviewModel(report);
  const el = h("section", { class: "view view-overview", "data-view": "overview" });
  el.appendChild(h("h2", null, "Overview ", h("span", { class: "sub" }, "attention in its step")));
  el.appendChild(h("p", { class: `limit limit-${m.kind}`, "data-testid": "limit", "data-kind": m.kind }, m.sentence));
  if (!m.present || m.span === null) {
    el.appendChild(h("p", { class: "sub" }, "No GPU activity recorded: the step's GPU split is unknown."));
    el.appendChild(hostLine(m.host));
    return el;
  }
  el.appendChild(h("div", { class: "cards" },
    card("GPU span", fmtUs(m.span), m.label, "span"),
    card("GPU busy", fmtUs(m.busy), `${fmtShare(m.busy !== null ? m.busy / m.span : null)} of the span`, "busy"),
    card("Attention", fmtUs(m.attentionUs),
      `${fmtShare(m.attentionOfBusy)} of busy time · ${fmtShare(m.attentionOfSpan)} of the span`, "attention"),
  ));
  el.appendChild(h("h3", null, "The step's GPU span"));
  el.appendChild(h("div", { class: "step-bar", "data-testid": "step-bar", role: "img",
    "aria-label": m.bar.map((p) => `${p.label} ${fmtShare(p.share)}`).join(", ") },
  ...m.bar.map((p) => h("div", { class: "step-seg", "data-part": p.part, title: `${p.label}: ${fmtUs(p.us)} (${fmtShare(p.share)})`,
    style: `width:${(p.share * 100).toFixed(3)}%;background:${p.color}` }))));
  el.appendChild(h("table", { class: "grid", "data-testid": "step-parts" },
    h("thead", null, h("tr", null, h("th", null, "Part"), h("th", { class: "num" }, "Time"), h("th", { class: "num" }, "Share of span"))),
    h("tbody", null, ...m.bar.map((p) => h("tr", { "data-part": p.part },
      h("td", null, h("span", { class: "attn-dot", style: `background:${p.color}` }), p.label),
      usCell(p.us), h("td", { class: "num" }, fmtShare(p.share)))))));
  const notes: [string, string][] = [];
  if (m.idleHost !== null && m.idleSync !== null) {
    notes.push(["idle", `idle: waiting on the host ${fmtUs(m.idleHost)}, on a synchronisation ${fmtUs(m.idleSync)}`
      + (m.idleKernel ? `, kernel wait (work already issued) ${fmtUs(m.idleKernel)}` : "")]);
  }
  if (m.communication) notes.push(["communication", `communication ${fmtUs(m.communication.total)}: ${fmtUs(m.communication.exposed)} exposed, ${fmtUs(m.communication.hidden)} hidden under compute`]);
  if (m.memcpy.length) notes.push(["memcpy", "memcpy " + m.memcpy.map((d) => `${d.direction} ${fmtUs(d.us)} ×${fmtCount(d.count)}`).join(", ")]);
  if (m.cut) notes.push(["cut", "the GPU window was cut: the gaps of steps that lost kernels are not recorded, not idle"]);
  el.appendChild(h("ul", { class: "step-notes", "data-testid": "step-notes" }, ...notes.map(([k, n]) => h("li", { "data-note": k }, n))));
  el.appendChild(hostLine(m.host));
  if (m.steps.length > 1) {
    el.appendChild(h("h3", null, `Per step (${m.steps.length} steps)`));
    const rows = m.steps.map((s) => h("tr", { "data-step": s.label },
      h("td", null, s.label), usCell(s.span ?? NaN), usCell(s.busy ?? NaN), usCell(s.idle ?? NaN), usCell(s.attention ?? NaN),
      usCell(s.dataLoading), usCell(s.optimizer)));
    const stat = (k: "min" | "median" | "max") => {
      const col = (f: (s: (typeof m.steps)[number]) => number | null) => spread(m.steps.map(f))?.[k] ?? NaN;
      return h("tr", { class: "spread", "data-spread": k }, h("td", null, k),
        usCell(col((s) => s.span)), usCell(col((s) => s.busy)), usCell(col((s) => s.idle)), usCell(col((s) => s.attention)),
        usCell(col((s) => s.dataLoading)), usCell(col((s) => s.optimizer)));
    };
    el.appendChild(h("table", { class: "grid", "data-testid": "step-spread" },
      h("thead", null, h("tr", null, ...["Step", "GPU span", "Busy", "Idle", "Attention", "Data loading", "Optimizer"]
        .map((c, i) => h("th", { class: i ? "num" : null }, c)))),
      h("tbody", null, ...rows, stat("min"), stat("median"), stat("max"))));
  }
  if (m.phases.some((p) => p.phase !== "unknown")) {
    el.appendChild(h("h3", null, "Serving phases"));
    el.appendChild(h("table", { class: "grid", "data-testid": "phases" },
      h("thead", null, h("tr", null, h("th", null, "Phase"), h("th", { class: "num" }, "Calls"), h("th", { class: "num" }, "GPU time"),
        h("th", null, "Roofline"), h("th", null, "Evidence"))),
      h("tbody", null, ...m.phases.map((p) => h("tr", { "data-phase": p.phase },
        h("td", null, p.phase), h("td", { class: "num" }, fmtCount(p.calls)), usCell(p.us),
        h("td", { "data-testid": "phase-roofline" }, phaseRoof(p)), h("td", null, p.evidence))))));
  }
  return el;
}

/** "memory-bound: KV cache read 2.1 GB, 2.4 TB/s" (a decode is judged on the cache it reads). */
export function phaseRoof(p: PhaseModel): string {
  const r = p.roofline;
  if (!r) return "no shapes recorded";
  const bound = r.bound ? `${r.bound}-bound` : "bound unknown";
  return `${bound}: ${r.kvCache ? (r.atMost ? "KV cache read at most" : "KV cache read") : "bytes"} ${fmtBytes(r.bytes)}` + (r.tbs !== null ? `, ${fmtTbs(r.tbs)}` : "");
}

function hostLine(host: { step: number | null; dataLoading: number; optimizer: number }): HTMLElement {
  const parts = [host.step !== null ? `step ${fmtUs(host.step)}` : null,
    host.dataLoading ? `data loading ${fmtUs(host.dataLoading)}` : null, host.optimizer ? `optimizer ${fmtUs(host.optimizer)}` : null];
  return h("p", { class: "host-line", "data-testid": "host-line" }, "Host: " + (parts.filter(Boolean).join(", ") || "no step recorded"));
}

function card(title: string, value: string, detail: string, key: string): HTMLElement {
  return h("div", { class: "card", "data-card": key },
    h("div", { class: "card-title" }, title), h("div", { class: "card-value" }, value),
    detail ? h("div", { class: "card-detail" }, detail) : null);
}

import { h } from "../dom";
import { fmtUs } from "../format";
import { implKind, stageLabel } from "../model";
import { stageColor } from "../colors";
import type { Basis } from "../tags";

export function badge(impl: string, extra?: string, title?: string): HTMLElement {
  const kind = implKind(impl);
  return h("span", { class: `badge badge-${kind}`, title: title || `${impl}: ${kind}`, "data-impl": impl },
    impl, extra ? h("span", { class: "badge-extra" }, extra) : null);
}

export function stageChip(stage: string, pass?: string): HTMLElement {
  return h("span", { class: "stage-chip", "data-stage": stage },
    h("span", { class: "attn-dot", style: `background:${stageColor(stage)}` }),
    stageLabel(stage) + (pass === "bwd" ? " (bwd)" : ""));
}

/** A time cell that keeps the exact value for tests and tooltips. */
export function usCell(us: number, cls = "num"): HTMLTableCellElement {
  return h("td", { class: cls, "data-us": String(us), title: `${us} µs` }, fmtUs(us));
}

export function basisWord(b: Basis): string {
  return b === "gpu" ? "GPU kernel time" : "CPU op time";
}

export function toggle<T extends string>(
  label: string, options: { value: T; text: string; disabled?: boolean; title?: string }[], current: T,
  onPick: (v: T) => void, name: string,
): HTMLElement {
  return h("div", { class: "toggle", role: "group", "aria-label": label, "data-toggle": name },
    h("span", { class: "toggle-label" }, label),
    ...options.map((o) => h("button", {
      type: "button", class: o.value === current ? "on" : "", disabled: !!o.disabled, title: o.title || null,
      "aria-pressed": o.value === current ? "true" : "false", "data-value": o.value,
      onclick: () => { if (o.value !== current) onPick(o.value); },
    }, o.text)));
}

/** A kernel name: short form shown, the full name one click away (and always in the title). */
export function kernelName(full: string, short: string): HTMLElement {
  if (short === full) return h("span", { class: "kname", "data-full": full }, full);
  const d = h("details", { class: "kname", "data-full": full },
    h("summary", { title: full }, short),
    h("div", { class: "kname-full" }, full));
  return d;
}

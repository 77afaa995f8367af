// The Reading panel: one call's layer type × implementation read the way "Attention is all you
// profile" reads a call. DOM only; what it says comes from reading_model.ts.
import { h } from "../dom";
import { distinctShortNames } from "../format";
import { claimLink, isUnknown, readingModel, type ClaimIds, type Unknown } from "../reading_model";
import type { CallReading } from "../route_types";
import type { CallEvent } from "../types";
import { kernelName, stageChip } from "./common";

function unknownLine(piece: string, u: Unknown): HTMLElement {
  return h("p", { class: "reading-unknown", "data-testid": "reading-unknown", "data-piece": piece }, "unknown: ", u.unknown);
}

function section(title: string, testid: string, ...body: (Node | null)[]): HTMLElement {
  return h("div", { class: "reading-section", "data-testid": testid }, h("h4", null, title), ...body);
}

/** ``events``: the call's own events, which a claim (an extra, a flag, an occupancy figure) is linked to
 *  when clicked: the panel's kernel rows and ``onLink`` (One call's chart and events table) show them. */
export function readingPanel(r: CallReading | null | undefined, events?: CallEvent[],
  onLink?: (hit: CallEvent[] | null) => void): HTMLElement {
  const m = readingModel(r);
  const el = h("section", { class: "reading", "data-testid": "reading-panel" });
  const status = h("p", { class: "hint claim-status", "data-testid": "claim-status", role: "status" },
    "click an extra, a flag or a 0% occupancy figure to highlight the kernels of this call it rests on");
  let picked: HTMLElement | null = null;
  // A claim as a clickable element: a second click on it clears the highlight.
  const claim = (node: HTMLElement, ids: ClaimIds): HTMLElement => {
    if (!events) return node;
    node.classList.add("claim");
    node.setAttribute("tabindex", "0");
    node.setAttribute("data-claim", "");
    const pick = () => {
      const off = picked === node;
      picked?.removeAttribute("data-picked");
      picked = off ? null : node;
      const link = off ? null : claimLink(ids, events);
      if (picked) picked.setAttribute("data-picked", "");
      status.textContent = link ? link.text : "no claim picked";
      const names = new Set(link ? link.events.map((e) => e.name) : []);
      for (const row of panelRows()) row.toggleAttribute("data-claim-hit", names.has(row.getAttribute("data-kernel") || ""));
      onLink?.(link ? link.events : null);
    };
    node.addEventListener("click", pick);
    node.addEventListener("keydown", (ev) => { if ((ev as KeyboardEvent).key === "Enter") pick(); });
    return node;
  };
  const panelRows = () => [...el.querySelectorAll<HTMLElement>('[data-testid="reading-kernel"]')];
  if (!m) {
    el.appendChild(h("h3", null, "Reading"));
    el.appendChild(unknownLine("all", { unknown: "this answer has no reading (a tb-attn server before engine 13)" }));
    return el;
  }
  el.appendChild(h("h3", null, "Reading ", h("span", { class: "sub", "data-testid": "reading-title" }, m.title)));
  if (events) el.appendChild(status);

  // a serving trace of two phases or more: the call's phase, and the reading over each phase's calls
  const ph = m.phases;
  if (ph) {
    el.appendChild(section("By serving phase", "reading-phases",
      h("p", { class: "reading-headline", "data-testid": "reading-phase", "data-phase": ph.phase }, ph.headline),
      h("table", { class: "grid reading-phase-table" },
        h("thead", null, h("tr", null, ...["Phase", "Calls", "Expected against actual, per forward", "Extras per call",
          "Host vs GPU per call"].map((c) => h("th", null, c)))),
        h("tbody", null, ...ph.rows.map((p) => {
          const e = p.expected;
          return h("tr", {
            "data-testid": "reading-phase-row", "data-phase": p.phase, "data-calls": String(p.calls),
            ...(p.own ? { "data-own": "" } : {}),
            ...(isUnknown(e) ? {} : { "data-expected": e.expected === null ? "" : String(e.expected), "data-ran": String(e.ran) }),
          },
          h("td", null, p.own ? h("strong", null, p.phase, " (this call)") : p.phase),
          h("td", null, String(p.calls)),
          h("td", null, isUnknown(e) ? `unknown: ${e.unknown}` : e.headline),
          h("td", null, isUnknown(e) ? "" : e.extras.length ? h("ul", { class: "reading-phase-extras" },
            ...e.extras.map((x) => h("li", { "data-testid": "reading-phase-extra", "data-cause": x.cause },
              h("strong", null, x.label), ` · ${x.cost}`))) : "none"),
          h("td", { "data-verdict": p.verdict ?? "" }, p.host));
        })))));
  }

  const e = m.expected;
  el.appendChild(section(`Expected against actual, per forward${ph ? ", all phases" : ""}`, "reading-expected", isUnknown(e) ? unknownLine("expected", e)
    : h("div", { "data-expected": e.expected === null ? "" : String(e.expected), "data-ran": String(e.ran), "data-unit": e.unit },
      h("p", { class: "reading-headline", "data-testid": "reading-headline" }, e.headline),
      e.steps ? h("p", { class: "hint" }, `expected steps: ${e.steps}`) : null,
      e.extras.length ? h("table", { class: "grid reading-extras" },
        h("thead", null, h("tr", null, ...["Extra", "Cost", "Fix"].map((c) => h("th", null, c)))),
        h("tbody", null, ...e.extras.map((x) => claim(h("tr", { "data-testid": "reading-extra", "data-cause": x.cause },
          h("td", null, h("strong", null, x.label), h("div", { class: "fingerprint" }, x.what),
            h("div", { class: "fingerprint", title: x.source }, x.names)),
          h("td", { class: "reading-cost" }, x.cost),
          h("td", null, x.fix)), x.evidence)))) : h("p", { class: "hint" }, "no extras: what ran is what was expected"),
      ...e.flags.map((f) => claim(h("p", { class: "hint reading-flag", "data-testid": "reading-flag-claim", "data-flag": f.flag },
        "⚠ ", f.text), f.evidence)),
      ...e.notes.map((n) => h("p", { class: "hint", "data-testid": "reading-note" }, n)),
      h("p", { class: "hint reading-source" }, `expectation: ${e.source}`))));
  if (m.backward) el.appendChild(h("p", { class: "hint", "data-testid": "reading-backward" }, `backward: ${m.backward}`));

  const ho = m.host;
  el.appendChild(section("Host vs GPU", "reading-host", isUnknown(ho) ? unknownLine("host", ho)
    : h("div", { "data-verdict": ho.verdict },
      h("p", { class: "reading-headline" }, ho.headline, " — ",
        h("strong", { class: `verdict-${ho.verdict.replace(/\W/g, "")}`, "data-testid": "reading-verdict" }, ho.verdictText)),
      h("p", { class: "hint" }, ho.parts), ho.launches ? h("p", { class: "hint" }, ho.launches) : null,
      ho.fix ? h("p", null, "fix: ", ho.fix) : null)));

  const ks = m.kernels;
  const arch = m.deviceArch ? ` (device ${m.deviceArch})` : "";
  if (isUnknown(ks)) {
    el.appendChild(section(`Kernels${arch}`, "reading-kernels", unknownLine("kernels", ks)));
  } else {
    const short = distinctShortNames(ks.map((k) => k.name));
    el.appendChild(section(`Kernels of this call${arch}`, "reading-kernels",
      h("table", { class: "grid" },
        h("thead", null, h("tr", null, ...["Stage", "Kernel", "Fingerprint", "Occupancy"].map((c) => h("th", null, c)))),
        h("tbody", null, ...ks.map((k) => h("tr", { "data-testid": "reading-kernel", "data-kernel": k.name },
          h("td", null, stageChip(k.stage, k.pass)),
          h("td", { class: "kcell" }, kernelName(k.name, short.get(k.name) ?? k.name), h("div", { class: "fingerprint" }, k.inCall)),
          h("td", null, k.fields.length ? h("dl", { class: "reading-fields" }, ...k.fields.flatMap(([f, v]) => [h("dt", null, f), h("dd", null, v)]))
            : h("span", { class: "fingerprint" }, k.summary),
          ...k.flags.map((f) => h("div", { class: "reading-flag", "data-testid": "reading-flag" }, "⚠ ", f))),
          h("td", { "data-testid": "reading-occupancy" }, h("div", null, k.occupancy),
            k.occupancyConfig ? h("div", { class: "fingerprint" }, k.occupancyConfig) : null,
            ...k.tags.map((t) => (k.zeroEvidence && t !== "low by design"
              ? claim(h("span", { class: "reading-tag", "data-tag": t, "data-testid": "reading-zero-claim" }, t), k.zeroEvidence)
              : h("span", { class: "reading-tag", "data-tag": t }, t))),
            h("div", { class: "fingerprint" }, k.occupancyReading)))))),
      m.kernelsOmitted ? h("p", { class: "hint" }, `… and ${m.kernelsOmitted} more kernel names`) : null,
      m.occupancyNote ? h("p", { class: "hint" }, `occupancy: ${m.occupancyNote}`) : null));
  }

  const w = m.whyNotFlash;
  el.appendChild(section("Why not flash", "reading-wnf", isUnknown(w) ? unknownLine("why_not_flash", w)
    : h("div", null, h("p", { class: "hint" }, `${w.judged} · rules: ${w.rules}`),
      h("ul", { class: "reading-backends" }, ...w.backends.map((b) => h("li", {
        "data-testid": "reading-backend", "data-backend": b.backend, "data-state": b.state,
      }, h("strong", null, `${b.backend}: ${b.state}`),
      b.refusals.length ? h("ul", null, ...b.refusals.map((x) => h("li", { "data-testid": "reading-refusal", "data-check": x.check },
        x.reason, " → ", h("em", null, x.fix)))) : null,
      b.unread ? h("div", { class: "fingerprint" }, b.unread) : null))))));
  return el;
}

import { api, ApiError, untilReady } from "../api";
import { h, notice } from "../dom";
import { fmtCount, fmtDeltaPct, fmtDeltaUs, fmtUs } from "../format";
import { compareModel } from "../compare_model";
import { notAJob, ranksModel, type RanksModel } from "../ranks-model";
import type { RanksDoc } from "../route_types";
import { basisWord, badge, stageChip, usCell } from "./common";
import type { Ctx } from "./context";

/** Ranks of one job: a ranks x stages heatmap (a click opens that rank's report) and rank against rank. */
export async function ranksView(ctx: Ctx, root: HTMLElement): Promise<void> {
  const el = h("section", { class: "view view-ranks", "data-view": "ranks" });
  root.appendChild(el);
  const run = ctx.target?.run;
  el.appendChild(h("h2", null, "Ranks ", h("span", { class: "sub" }, run || "")));
  if (!run) return;
  const workers = ctx.runs.runs.find((r) => r.run === run)?.workers.length ?? 0;
  if (workers < 2) {
    // No need to ask (and log a 404): one worker cannot be several ranks.
    el.appendChild(notice("info", `${run} is not a job of several ranks`,
      "A job's run holds one trace per rank (kineto's distributedInfo, or workers named like rank3). Pick such a run above."));
    return;
  }
  const status = notice("loading", `Summarising the ranks of ${run}…`, "waiting for the ranks' analyses");
  el.appendChild(status);
  let doc: RanksDoc | null;
  try {
    doc = await untilReady(() => api.ranks(run), (l) => {
      const d = status.querySelector(".notice-detail");
      if (d) d.textContent = `waiting for ${(l.waitingFor || []).join(", ") || "the analyses"}`;
    }, ctx.alive);
  } catch (e) {
    el.removeChild(status);
    const missing = e instanceof ApiError && e.status === 404;
    el.appendChild(notice(missing ? "info" : "error", missing ? `${run} is not a job of several ranks` : "Cannot summarise the ranks",
      (e as Error).message));
    return;
  }
  if (!doc || !ctx.alive()) return;
  el.removeChild(status);
  const why = notAJob(doc);
  if (why) {
    el.appendChild(notice("info", `${run} is not a job of several ranks`, why));
    return;
  }
  const m = ranksModel(doc);

  el.appendChild(h("div", { class: "headlines", "data-testid": "ranks-headline" },
    h("div", { class: "headline" }, m.headline),
    ...m.odd.map((line) => h("div", { class: "headline warn", "data-testid": "ranks-odd" }, line)),
    m.missingCount ? h("div", { class: "hint" }, `missing ranks (${fmtCount(m.missingCount)}): ${m.missing.slice(0, 30).join(", ")}${m.missingCount > 30 ? " …" : ""}`) : null,
    ...m.leftOut.map((line) => h("div", { class: "hint", "data-testid": "ranks-left-out" }, line)),
    ...m.errors.map((line) => h("div", { class: "hint err" }, line)),
    h("div", { class: "hint" }, `${fmtCount(m.rows.length)} ranks${m.worldSize ? ` of world size ${m.worldSize}` : ""}; `
      + `attention time is ${basisWord(m.basis)}; median ${fmtUs(m.medianUs)}. Click a rank to open its report.`)));

  el.appendChild(heatmap(ctx, m));
  if (m.pair) el.appendChild(rankCompare(ctx, run, m));
  if (m.layers.length) {
    el.appendChild(h("h3", null, "Layers whose time differs most across ranks"));
    el.appendChild(h("table", { class: "grid", "data-testid": "ranks-layers" },
      h("thead", null, h("tr", null, h("th", null, "Layer"), h("th", { class: "num" }, "Median"), h("th", { class: "num" }, "Min"),
        h("th", { class: "num" }, "Max"), h("th", { class: "num" }, "Max / median"), h("th", { class: "num" }, "Slowest rank"))),
      h("tbody", null, ...m.layers.map((l) => h("tr", { "data-layer": l.layer },
        h("td", null, l.layer), usCell(l.median_us), usCell(l.min_us), usCell(l.max_us),
        h("td", { class: "num" }, l.spread === null ? "–" : `${l.spread.toFixed(2)}×`), h("td", { class: "num" }, String(l.slowest_rank)))))));
  }
}

function heatmap(ctx: Ctx, m: RanksModel): HTMLElement {
  const open = (worker: string) => ctx.set({ view: "summary", worker, span: null, layer: null, call: null });
  return h("table", { class: "grid heatmap", "data-testid": "ranks-heatmap" },
    h("thead", null, h("tr", null, h("th", null, "Rank"), h("th", { class: "num" }, "Attention"), h("th", { class: "num" }, "× median"),
      ...m.stages.map((s) => h("th", { class: "num" }, stageChip(s.stage))), h("th", null, "Implementations"))),
    h("tbody", null, ...m.rows.map((r) => h("tr", {
      class: "clickable" + (r.slowest ? " slowest" : ""), "data-rank": String(r.rank), "data-worker": r.worker, tabindex: 0,
      title: `open rank ${r.rank}'s report (${r.worker})`,
      onclick: () => open(r.worker),
      onkeydown: (ev: Event) => { if ((ev as KeyboardEvent).key === "Enter") open(r.worker); },
    },
    h("td", null, String(r.rank), r.slowest ? h("span", { class: "hint" }, " slowest") : null),
    usCell(r.attention_us),
    h("td", { class: "num", "data-ratio": String(r.vs_median ?? "") }, r.vs_median === null ? "–" : r.vs_median.toFixed(2)),
    ...r.cells.map((c) => h("td", { class: "num heat", "data-stage": c.stage, "data-us": String(c.us), style: `background:${c.color}`,
      title: `rank ${r.rank}, ${c.stage}: ${c.us} µs` }, c.us ? fmtUs(c.us) : "–")),
    h("td", null, ...(r.implementations || []).map((impl) => badge(impl)),
      ...r.odd.map((o) => h("span", { class: "hint err" }, ` ${o}`)))))));
}

function rankCompare(ctx: Ctx, run: string, m: RanksModel): HTMLElement {
  const box = h("div", { class: "rank-compare", "data-testid": "rank-compare" });
  const pick = (label: string, value: string) => {
    const sel = h("select", { "aria-label": label },
      ...m.rows.map((r) => h("option", { value: r.worker, selected: r.worker === value }, `rank ${r.rank}`)));
    return sel;
  };
  const [a0, b0] = m.pair!;
  const a = pick("baseline rank", a0);
  const b = pick("compared rank", b0);
  const out = h("div");
  const draw = async () => {
    while (out.firstChild) out.removeChild(out.firstChild);
    if (a.value === b.value) {
      out.appendChild(h("p", { class: "hint" }, "Pick two different ranks."));
      return;
    }
    let doc;
    try {
      doc = await untilReady(() => api.compareWorkers(run, [a.value, b.value]), () => {}, ctx.alive);
    } catch (e) {
      out.appendChild(notice("error", "Cannot compare these ranks", (e as Error).message));
      return;
    }
    if (!doc || !ctx.alive()) return;
    const cm = compareModel(doc);
    const label = (w: string) => `rank ${m.rows.find((r) => r.worker === w)?.rank ?? w}`;
    out.appendChild(h("div", { class: "headlines" }, ...cm.headlines.map((line) => h("div", { class: "headline" }, line))));
    out.appendChild(h("table", { class: "grid", "data-testid": "rank-compare-stages" },
      h("thead", null, h("tr", null, h("th", null, "Stage"), h("th", { class: "num" }, label(a.value)), h("th", { class: "num" }, label(b.value)),
        h("th", { class: "num" }, "Δ"), h("th", { class: "num" }, "Δ%"))),
      h("tbody", null, ...cm.stageRows.map((r) => h("tr", { "data-stage": r.stage, "data-pass": r.pass },
        h("td", null, stageChip(r.stage, r.pass)), ...r.values.map((v) => usCell(v)),
        h("td", { class: `num ${r.delta < 0 ? "better" : r.delta > 0 ? "worse" : ""}`, "data-us": String(r.delta) }, fmtDeltaUs(r.delta)),
        h("td", { class: "num" }, fmtDeltaPct(r.pct)))))));
  };
  a.addEventListener("change", draw);
  b.addEventListener("change", draw);
  box.appendChild(h("h3", null, "Rank against rank"));
  box.appendChild(h("div", { class: "pickers" }, h("label", null, "Baseline ", a), h("label", null, " against ", b)));
  box.appendChild(out);
  void draw();
  return box;
}

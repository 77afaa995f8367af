// The Attention tab's entry point. TensorBoard imports this ES module inside the plugin's iframe
// and calls render(); everything is drawn into document.body from the backend's JSON.

import { api, ApiError, untilReady } from "./api";
import { disposeCharts } from "./charts";
import { clear, h, notice } from "./dom";
import { defaultRun, defaultSpan, defaultTarget, skippedByReason, spanChoice } from "./runs_model";
import { mergeHash, parseHash, stateFromParams, type State, type View } from "./state";
import { STYLE } from "./style";
import { splitSweepRuns } from "./sweep_runs";
import type { RunsDoc } from "./route_types";
import type { Report } from "./types";
import { compareView } from "./views/compare";
import type { Ctx, Target } from "./views/context";
import { kernelsView } from "./views/kernels";
import { ranksView } from "./views/ranks";
import { memoryView } from "./views/memory";
import { overviewView } from "./views/overview";
import { rooflineView } from "./views/roofline";
import { scalingView } from "./views/scaling";
import { stagesView } from "./views/stages";
import { summaryView } from "./views/summary";
import { sweepView } from "./views/sweep";
import { timelineView } from "./views/timeline";

const TAB = "tb_attn";

const VIEW_TABS: { view: View; text: string; draw: (ctx: Ctx, root: HTMLElement) => Promise<void> }[] = [
  { view: "overview", text: "Overview", draw: overviewView },  // opens first: attention in its step
  { view: "summary", text: "Summary", draw: summaryView },
  { view: "stages", text: "Stages by layer", draw: stagesView },
  { view: "kernels", text: "Kernels by stage", draw: kernelsView },
  { view: "compare", text: "Compare", draw: compareView },
  { view: "scaling", text: "Scaling", draw: scalingView },
  { view: "timeline", text: "One call", draw: timelineView },
  { view: "memory", text: "Memory", draw: memoryView },
  { view: "roofline", text: "Roofline", draw: rooflineView },
  { view: "ranks", text: "Ranks", draw: ranksView },
  { view: "sweep", text: "Sweep", draw: sweepView },
];

/** The window whose URL holds the state: TensorBoard's page when we are in its iframe. */
function hostWindow(): Window {
  try {
    if (window.parent && window.parent !== window && window.parent.location.href) return window.parent;
  } catch {
    // another origin: keep the state in our own URL
  }
  return window;
}

class App {
  private state: State;
  private runs: RunsDoc = { runs: [], scanned: false };
  private reports = new Map<string, Report>();
  private generation = 0;
  private header = h("header", { class: "attn-header" });
  private main = h("main", { class: "attn-main", "aria-live": "polite" });
  private runsTimer: ReturnType<typeof setTimeout> | undefined;
  private lastRunsJson = "";

  constructor(private root: HTMLElement) {
    this.state = this.readUrl();
  }

  private readUrl(): State {
    return stateFromParams(parseHash(hostWindow().location.hash).params);
  }

  private writeUrl(): void {
    const host = hostWindow();
    const next = mergeHash(host.location.hash, this.state, TAB);
    if (next !== host.location.hash) {
      try {
        host.history.replaceState(host.history.state, "", host.location.pathname + host.location.search + next);
      } catch {
        // a sandboxed frame may refuse; the view still works, the link just does not follow
      }
    }
  }

  async start(): Promise<void> {
    clear(this.root);
    this.root.appendChild(h("style", null, STYLE));
    this.root.appendChild(h("div", { class: "attn-app", "data-testid": "attn-app" }, this.header, this.main));
    hostWindow().addEventListener("hashchange", () => {
      const s = this.readUrl();
      if (JSON.stringify(s) !== JSON.stringify(this.state)) {
        this.state = s;
        this.draw();
      }
    });
    this.main.appendChild(notice("loading", "Looking for profiler traces…"));
    await this.refreshRuns(true);
  }

  /** Ask for /runs; again every few seconds while something is still being analysed. */
  private async refreshRuns(first = false): Promise<void> {
    clearTimeout(this.runsTimer);
    let doc: RunsDoc | null = null;
    try {
      const r = await api.runs();
      doc = "loading" in r ? null : r;
    } catch (e) {
      if (first) {
        clear(this.main);
        this.main.appendChild(notice("error", "Cannot list runs", (e as Error).message));
      }
      this.runsTimer = setTimeout(() => this.refreshRuns(first), 5000);
      return;
    }
    if (!doc) return;
    const json = JSON.stringify(doc);
    const changed = json !== this.lastRunsJson;
    this.lastRunsJson = json;
    this.runs = doc;
    const busy = doc.scanned === false || doc.runs.some((r) => r.status === "loading");
    if (first || changed) {
      if (first || !doc.runs.length || !this.target()) this.draw();
      else this.drawHeader();
    }
    this.runsTimer = setTimeout(() => this.refreshRuns(false), busy ? 2000 : 15000);
  }

  private target(): Target | null {
    const run = this.state.run ?? defaultRun(this.runs);
    if (!run) return null;
    const info = this.runs.runs.find((r) => r.run === run);
    if (!info) return { run, worker: this.state.worker, span: this.state.span };
    const def = defaultTarget(this.runs, run);
    const worker = this.state.worker && info.workers.some((w) => w.worker === this.state.worker) ? this.state.worker : def?.worker ?? null;
    const w = info.workers.find((x) => x.worker === worker);
    const span = this.state.span !== null && w?.spans.some((s) => s.span === this.state.span)
      ? this.state.span : (w ? defaultSpan(w) : null);
    return { run, worker, span };
  }

  private set = (patch: Partial<State>, redraw = true): void => {
    this.state = { ...this.state, ...patch };
    this.writeUrl();
    if (redraw) this.draw();
  };

  private drawHeader(): void {
    clear(this.header);
    const t = this.target();
    const option = (r: RunsDoc["runs"][number]) => h("option", { value: r.run, selected: t?.run === r.run },
      r.run + (r.status === "loading" ? " (analysing…)" : r.status === "error" ? " (cannot be read)" : ""));
    const byName = new Map(this.runs.runs.map((r) => [r.run, r]));
    const { own, sweeps } = splitSweepRuns(this.runs.runs.map((r) => r.run));
    const runSel = h("select", { "aria-label": "run", "data-testid": "run-select" },
      ...own.map((n) => option(byName.get(n)!)),
      ...sweeps.map(([sweep, cells]) => h("optgroup", { label: `sweep ${sweep}: ${cells.length} profiled cell${cells.length === 1 ? "" : "s"}` },
        ...cells.map((n) => option(byName.get(n)!)))));
    runSel.addEventListener("change", () => this.set({ run: runSel.value, worker: null, span: null, layer: null, call: null }));
    const info = this.runs.runs.find((r) => r.run === t?.run);
    const workers = info?.workers || [];
    const workerSel = h("select", { "aria-label": "worker", "data-testid": "worker-select", disabled: workers.length < 2 },
      ...workers.map((w) => h("option", { value: w.worker, selected: w.worker === t?.worker }, w.worker)));
    workerSel.addEventListener("change", () => this.set({ worker: workerSel.value, span: null, layer: null, call: null }));
    const spans = workers.find((w) => w.worker === t?.worker)?.spans || [];
    const spanSel = h("select", { "aria-label": "span", "data-testid": "span-select", disabled: spans.length < 2 },
      ...spans.map((s) => h("option", { value: s.span, selected: s.span === t?.span, title: spanChoice(s).tip },
        spanChoice(s).label + (s.status === "loading" ? " (analysing…)" : s.status === "error" ? " (cannot be read)"
          : s.summary?.empty ? " (recorded nothing)" : ""))));
    spanSel.addEventListener("change", () => this.set({ span: spanSel.value, layer: null, call: null }));
    const needsTarget = this.state.view !== "compare" && this.state.view !== "scaling" && this.state.view !== "sweep";
    this.header.appendChild(h("div", { class: "attn-pickers" },
      h("span", { class: "attn-title" }, "Attention"),
      h("label", { class: needsTarget ? "" : "dim" }, "Run ", runSel),
      h("label", { class: needsTarget ? "" : "dim" }, "Worker ", workerSel),
      h("label", { class: needsTarget ? "" : "dim" }, "Span ", spanSel)));
    this.header.appendChild(h("nav", { class: "attn-tabs", role: "tablist" },
      ...VIEW_TABS.map((v) => h("button", {
        type: "button", role: "tab", class: v.view === this.state.view ? "on" : "", "data-tab": v.view,
        "aria-selected": v.view === this.state.view ? "true" : "false",
        onclick: () => this.set({ view: v.view }),
      }, v.text))));
  }

  private draw(): void {
    const gen = ++this.generation;
    disposeCharts();
    this.drawHeader();
    clear(this.main);
    if (!this.runs.runs.length && this.state.view !== "sweep") {
      this.main.appendChild(this.runs.scanned === false
        ? notice("loading", "Looking for profiler traces…", "TensorBoard is listing the logdir.")
        : notice("empty", "No profiler traces in this logdir",
          this.runs.error || "tb-attn reads files named *.pt.trace.json[.gz], as torch.profiler.tensorboard_trace_handler writes them. "
            + "A tb-attn sweep (sweep.jsonl) opens in the Sweep tab."));
      this.drawSkipped();
      return;
    }
    this.drawSkipped();
    const target = this.target();
    if (target && !this.state.run) {
      // Pin the default, so that runs finishing their analysis later do not switch the view under the reader.
      this.state = { ...this.state, run: target.run };
      this.writeUrl();
      this.drawHeader();
    }
    const ctx: Ctx = {
      state: this.state,
      set: this.set,
      runs: this.runs,
      target,
      alive: () => gen === this.generation,
      report: (into, t) => this.report(into, t ?? target, () => gen === this.generation),
    };
    const tab = VIEW_TABS.find((v) => v.view === this.state.view) || VIEW_TABS[0];
    const root = h("div", { class: "view-root", "data-current-view": tab.view });
    this.main.appendChild(root);
    tab.draw(ctx, root).catch((e) => {
      if (gen !== this.generation) return;
      console.warn("tb-attn view failed", e);
      root.appendChild(notice("error", "This view failed to draw", (e as Error).message || String(e)));
    });
  }

  /** Which files the listing skipped and why, folded away under one line. */
  private drawSkipped(): void {
    const groups = skippedByReason(this.runs);
    if (!groups.length) return;
    const n = this.runs.skipped_count ?? this.runs.skipped?.length ?? 0;
    const shown = this.runs.skipped?.length ?? 0;
    this.main.appendChild(h("details", { class: "notice notice-info skipped-files", "data-testid": "skipped-files" },
      h("summary", null, `${n} file${n === 1 ? "" : "s"} in the logdir not listed`),
      ...groups.map((g) => h("div", { class: "notice-detail" }, h("b", null, g.reason + ": "), g.files.join(", "))),
      n > shown ? h("div", { class: "notice-detail" }, `… and ${n - shown} more`) : null));
  }

  private async report(into: HTMLElement, t: Target | null, alive: () => boolean): Promise<Report | null> {
    if (!t) return null;
    if (!this.runs.runs.some((r) => r.run === t.run)) {
      into.appendChild(notice("error", `No run named “${t.run}” in this logdir`, "Pick another run above."));
      return null;
    }
    // A trace the backend could not analyse: /runs already says why, no need to ask (and log a 4xx).
    const span = this.runs.runs.find((r) => r.run === t.run)?.workers.find((w) => w.worker === t.worker)
      ?.spans.find((s) => s.span === t.span);
    if (span?.status === "error") {
      into.appendChild(notice("error", `${t.run} cannot be analysed`, span.message || "the backend could not read this trace"));
      return null;
    }
    if (span?.summary?.kind === "memory_snapshot") {
      // A CUDA memory snapshot listed on its own: memory only, no calls, kernels or timeline.
      const box = notice("info", `${t.run} is a CUDA memory snapshot, not a trace`,
        "It records allocations, not attention calls or kernels: its memory is in the Memory view.");
      box.dataset.testid = "snapshot-only";
      box.appendChild(h("button", { type: "button", onclick: () => this.set({ view: "memory" }) }, "Open the Memory view"));
      into.appendChild(box);
      return null;
    }
    const key = JSON.stringify([t.run, t.worker, t.span]);
    const hit = this.reports.get(key);
    if (hit) return hit;
    const box = notice("loading", `Analysing ${t.run}…`, "reading the trace");
    into.appendChild(box);
    try {
      const r = await untilReady(() => api.report(t), (l) => {
        const d = box.querySelector(".notice-detail");
        if (d) d.textContent = l.phase ? `phase: ${l.phase}` : "waiting for the analysis";
      }, alive);
      if (box.parentNode) box.parentNode.removeChild(box);
      if (r) this.reports.set(key, r);
      return r;
    } catch (e) {
      if (box.parentNode) box.parentNode.removeChild(box);
      if (!alive()) return null;
      const status = e instanceof ApiError ? e.status : 0;
      into.appendChild(notice("error", status === 422 ? `${t.run} cannot be analysed` : `Cannot load ${t.run}`, (e as Error).message));
      return null;
    }
  }
}

export async function render(): Promise<void> {
  await new App(document.body).start();
}

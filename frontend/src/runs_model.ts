// The run picker's model: /runs (RunsDoc) flattened, the default run, worker and span, the skipped files. Pure
// functions, no DOM, no fetch (tested in test/model.test.ts).

import { n0 } from "./model";
import { sweepOfRun } from "./sweep_runs";
import { fmtSpan } from "./format";
import type { RunsDoc, SpanInfo } from "./route_types";

export interface Target {
  run: string;
  worker: string;
  span: string;
  status: "loading" | "ready" | "error";
  message?: string;
}

/** Every (run, worker, span) the backend lists, in its order. */
export function flattenRuns(doc: RunsDoc | null | undefined): Target[] {
  const out: Target[] = [];
  for (const r of doc?.runs || []) {
    for (const w of r.workers || []) {
      for (const s of w.spans || []) {
        out.push({ run: r.run, worker: w.worker, span: s.span, status: s.status, message: s.message });
      }
    }
  }
  return out;
}

/** The run's default worker and span: the first worker's default span, as the backend chooses. */
export function defaultTarget(doc: RunsDoc | null | undefined, run: string): { worker: string; span: string } | null {
  const r = (doc?.runs || []).find((x) => x.run === run);
  if (!r || !r.workers?.length || !r.workers[0].spans?.length) return null;
  const span = defaultSpan(r.workers[0]);
  return span === null ? null : { worker: r.workers[0].worker, span };
}

/** A worker's span shown by default: the backend's choice (the latest that recorded something),
 *  else the latest not known to be empty, else the latest. */
export function defaultSpan(w: { spans: SpanInfo[]; default_span?: string }): string | null {
  const spans = w.spans || [];
  if (w.default_span && spans.some((s) => s.span === w.default_span)) return w.default_span;
  for (let i = spans.length - 1; i >= 0; i--) {
    if (!(spans[i].status === "ready" && spans[i].summary?.empty)) return spans[i].span;
  }
  return spans.length ? spans[spans.length - 1].span : null;
}

/** The run to open first: the one with the largest attention time among ready runs, else the first; a
 * sweep's profiled cells only when the logdir holds nothing else. */
export function defaultRun(doc: RunsDoc | null | undefined): string | null {
  const all = doc?.runs || [];
  if (!all.length) return null;
  const own = all.filter((r) => sweepOfRun(r.run) === null);
  const runs = own.length ? own : all;
  let best: string | null = null;
  let bestUs = -1;
  for (const r of runs) {
    for (const w of r.workers || []) {
      for (const s of w.spans || []) {
        const sm = s.summary;
        if (s.status !== "ready" || !sm) continue;
        const us = n0(sm.time_basis === "cpu" ? sm.attention_cpu_us : sm.attention_gpu_us);
        if (n0(sm.calls) > 0 && us > bestUs) {
          bestUs = us;
          best = r.run;
        }
      }
    }
  }
  return best ?? runs[0].run;
}

/** The files the listing skipped, grouped by reason: [reason, files] in the order first seen. */
export function skippedByReason(doc: RunsDoc | null | undefined): { reason: string; files: string[] }[] {
  const out: { reason: string; files: string[] }[] = [];
  for (const k of doc?.skipped || []) {
    let g = out.find((x) => x.reason === k.reason);
    if (!g) out.push((g = { reason: k.reason, files: [] }));
    g.files.push(k.file);
  }
  return out;
}

/** A span's label in the picker: its time (fmtSpan), else its file's name (a trace named without
 * one), else "(no span)"; and its tooltip: the file, how the listing named it, the raw span. */
export function spanChoice(s: SpanInfo): { label: string; tip: string } {
  const file = s.file || "";
  const label = fmtSpan(s.span) || file.split("/").pop() || "(no span)";
  const tip = [file, s.named || "", s.span ? `span ${s.span}` : ""].filter((x) => x).join("\n");
  return { label, tip };
}

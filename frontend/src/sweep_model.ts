// The Sweep view's data: a /sweep document (tb-attn sweep's cells and the backend's analysis)
// shaped into chart series, the best-backend grid and the OOM marks. Pure functions, no DOM.

import { seriesColors } from "./colors";

import type { SweepBest, SweepCell, SweepDoc } from "./route_types";

export type CellStatus = SweepCell["status"];

/** torch.utils.benchmark's own mark of a noisy measurement (the backend's sweeps/analysis.NOISY_IQR). */
export const NOISY_IQR = 0.1;

export function seriesName(c: { backend: string; module?: string | null }): string {
  return c.module ? c.module : c.backend;
}

/** A colour per backend, the same in every chart and in the grid, and an implementation's colour on
 * every other page too (colors.seriesColors: a backend is an implementation; a timed module is not). */
export function backendColor(name: string, all: string[]): string {
  return seriesColors([...all, name]).get(name)!;
}

function positive(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null;
}

export function backendsOf(doc: SweepDoc): string[] {
  return [...new Set(doc.cells.map(seriesName))].sort();
}

export function batchesOf(doc: SweepDoc): number[] {
  return [...new Set(doc.cells.map((c) => c.batch))].sort((a, b) => a - b);
}

export function seqLensOf(doc: SweepDoc): number[] {
  return [...new Set(doc.cells.map((c) => c.seq_len))].sort((a, b) => a - b);
}

export interface SweepPoint {
  seqLen: number;
  value: number;
  cell: SweepCell;
}

export interface SweepSeries {
  backend: string;
  exponent: number | null;
  /** The noisiest cell's IQR / median when above NOISY_IQR: the time exponent is unreliable. */
  noisy: number | null;
  points: SweepPoint[];
  /** The shortest length at which this backend ran out of memory (this batch), if any. */
  oomAt: number | null;
}

/** One series per backend for one batch: time (median seconds) or peak bytes against seq_len. */
export function sweepSeries(doc: SweepDoc, batch: number, metric: "time" | "memory"): SweepSeries[] {
  const out: SweepSeries[] = [];
  for (const backend of backendsOf(doc)) {
    const cells = doc.cells.filter((c) => c.batch === batch && seriesName(c) === backend)
      .sort((a, b) => a.seq_len - b.seq_len);
    if (!cells.length) continue;
    const points: SweepPoint[] = [];
    for (const c of cells) {
      if (c.status !== "ok") continue;
      const v = positive(metric === "time" ? c.median_s : c.peak_bytes);
      if (v !== null) points.push({ seqLen: c.seq_len, value: v, cell: c });
    }
    const fit = doc.analysis.fits.find((f) => f.backend === backend && f.batch === batch);
    const oom = doc.analysis.oom_boundary.find((o) => o.backend === backend && o.batch === batch);
    out.push({
      backend, points, oomAt: oom ? oom.min_oom_seq_len : null,
      exponent: fit ? (metric === "time" ? fit.time_exponent : fit.memory_exponent) : null,
      noisy: metric === "time" && fit && typeof fit.max_iqr_fraction === "number" && fit.max_iqr_fraction > NOISY_IQR
        ? fit.max_iqr_fraction : null,
    });
  }
  return out.filter((s) => s.points.length || s.oomAt !== null);
}

/** "math · L^2.03" for legends; the fitted slope on log-log axes. */
export function seriesLabel(s: SweepSeries): string {
  return s.exponent === null ? s.backend : `${s.backend} · L^${s.exponent.toFixed(2)}`;
}

export interface GridCell {
  best: SweepBest | null;
  /** What the cell shows when no backend ran: "oom", "unsupported", a mix, or "not measured". */
  none: string | null;
}

/** The best backend per (batch, seq_len): rows are batches, columns lengths. */
export function bestGrid(doc: SweepDoc): { batches: number[]; seqLens: number[]; cell: (b: number, l: number) => GridCell } {
  const byKey = new Map(doc.analysis.best.map((b) => [`${b.batch}/${b.seq_len}`, b]));
  return {
    batches: batchesOf(doc), seqLens: seqLensOf(doc),
    cell: (b, l) => {
      const best = byKey.get(`${b}/${l}`) || null;
      if (best?.backend) return { best, none: null };
      if (!best) return { best: null, none: "not measured" };
      const kinds = [...new Set(Object.values(best.statuses))].sort();
      return { best, none: kinds.length ? kinds.join(" / ") : "not measured" };
    },
  };
}

export function statusCounts(doc: SweepDoc): [string, number][] {
  const order = ["ok", "oom", "unsupported", "error"];
  return Object.entries(doc.analysis.status_counts).sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]));
}

/** The shape all cells share (heads, head dim, dtype, ...), or the values when they differ. */
export function sharedShape(doc: SweepDoc): [string, string][] {
  const fields: [keyof SweepCell, string][] = [["device", "device"], ["device_name", "on"],
    ["torch_version", "torch"], ["dtype", "dtype"], ["heads", "heads"], ["kv_heads", "kv heads"],
    ["head_dim", "head dim"], ["causal", "causal"], ["pass", "pass"]];
  const out: [string, string][] = [];
  for (const [k, label] of fields) {
    const vals = [...new Set(doc.cells.map((c) => c[k]).filter((v) => v !== undefined && v !== null).map(String))];
    if (vals.length) out.push([label, vals.join(", ")]);
  }
  return out;
}

export function fmtSeconds(s: unknown): string {
  const v = typeof s === "number" && Number.isFinite(s) ? s : null;
  if (v === null) return "—";
  if (v >= 1) return `${v.toFixed(2)} s`;
  if (v >= 1e-3) return `${(v * 1e3).toFixed(2)} ms`;
  return `${(v * 1e6).toFixed(1)} µs`;
}

/** The skipped lines of a sweep.jsonl, as the view says them: one sentence and the notes the plugin
 * served (it serves the first 20; the count is of all). */
export function skippedLines(doc: Pick<SweepDoc, "skipped_lines" | "skipped_notes">): { summary: string; notes: string[] } | null {
  const n = doc.skipped_lines || 0;
  if (!n) return null;
  const notes = (doc.skipped_notes || []).filter((x) => typeof x === "string");
  const more = n > notes.length && notes.length ? ` (the first ${notes.length} listed)` : "";
  const what = n === 1 ? "line of sweep.jsonl is not a sweep cell and was" : "lines of sweep.jsonl are not sweep cells and were";
  return { summary: `${n} ${what} skipped${more}.`, notes };
}

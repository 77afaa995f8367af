// The Memory view's data shaping: pure functions from the memory section to what the view draws
// (unit-tested in test/memory_model.test.ts).

import { fmtBytes, fmtShare, naturalCompare, num } from "./format";
import type { MemorySection } from "./memory_types";
import type { MemoryDoc } from "./route_types";
import { stageColor } from "./colors";
import { stageLabel } from "./model";
import { logSlope, seqLenOf, seriesKeyOf, seriesLabel } from "./scaling_model";
import type { SeriesKey } from "./scaling_model";
import type { Report } from "./types";

export interface Band {
  start: number; // ms from the curve's start
  end: number;
  stage: string;
  pass: "fwd" | "bwd";
  layer: string;
  color: string;
  label: string;
}

export interface MemoryModel {
  points: [number, number][]; // [ms, bytes]
  reserved: [number, number][] | null;
  bands: Band[];
  peak: { t: number; bytes: number; explanation: string } | null;
  layers: MemorySection["layers"];
  stagesInBands: string[];
}

/** The curve in milliseconds and each call's stages as shaded bands (forward and backward). */
export function memoryModel(mem: MemorySection): MemoryModel {
  const t = mem.curve.t_us || [];
  const b = mem.curve.bytes || [];
  const n = Math.min(t.length, b.length);
  const points: [number, number][] = [];
  for (let i = 0; i < n; i++) points.push([t[i] / 1000, b[i]]);
  const r = mem.curve.reserved;
  const reserved = r && r.length === t.length && r.some((v) => v > 0) ? t.map((x, i) => [x / 1000, r[i]] as [number, number]) : null;
  const bands = (mem.spans || []).filter((s) => s.end_us > s.start_us).map((s) => ({
    start: s.start_us / 1000, end: s.end_us / 1000, stage: s.stage, pass: s.pass, layer: s.layer, color: stageColor(s.stage),
    label: `${stageLabel(s.stage)}${s.pass === "bwd" ? " (bwd)" : ""} · ${s.layer}`,
  }));
  const peak = mem.peak ? { t: mem.peak.t_us / 1000, bytes: mem.peak.bytes, explanation: mem.peak.explanation } : null;
  const stagesInBands = [...new Set(bands.map((x) => x.stage))];
  const layers = [...(mem.layers || [])].sort((a, c) => c.peak_growth_bytes - a.peak_growth_bytes || naturalCompare(a.layer, c.layer));
  return { points, reserved, bands, peak, layers, stagesInBands };
}

/** The section a view shows: the trace's own memory events first, else its snapshot. */
export function sectionOf(doc: MemoryDoc | null | undefined): MemorySection | null {
  return doc?.memory ?? null;
}

export interface OverlaySeries {
  run: string;
  points: [number, number][];
  peak: number;
  scoreBytes: number;
}

/** Several runs' curves on one axis, each from its own start (ms), for Compare. */
export function overlayModel(docs: { run: string; doc: MemoryDoc | null }[]): { series: OverlaySeries[]; missing: string[] } {
  const series: OverlaySeries[] = [];
  const missing: string[] = [];
  for (const { run, doc } of docs) {
    const mem = sectionOf(doc);
    if (!mem) { missing.push(run); continue; }
    series.push({ run, points: memoryModel(mem).points, peak: mem.peak_bytes, scoreBytes: mem.score_matrix.bytes_total });
  }
  return { series, missing };
}

export interface MemScalingPoint {
  run: string;
  seqLen: number;
  growth: number; // the largest peak growth of one attention call
  peak: number;
}

/** Attention's memory against sequence length per implementation, with the fitted exponent of L. */
export function memoryScaling(items: { run: string; report: Report }[]): {
  series: { implementation: string; label: string; group: string; points: MemScalingPoint[]; exponent: number | null }[];
  skipped: string[];
} {
  // One series per model, device and implementation, as the time chart groups them (model.seriesKeyOf).
  const by = new Map<string, MemScalingPoint[]>();
  const keys = new Map<string, SeriesKey>();
  const skipped: string[] = [];
  for (const { run, report } of items) {
    const mem = (report as Report & { memory?: MemorySection | null }).memory;
    const len = seqLenOf(report);
    const growth = Math.max(0, ...((mem?.layers || []).map((l) => num(l.peak_growth_bytes) ?? 0)));
    if (!mem || !len || growth <= 0) { skipped.push(run); continue; }
    const key = seriesKeyOf(report);
    const id = seriesLabel(key);
    keys.set(id, key);
    const pts = by.get(id) || [];
    pts.push({ run, seqLen: len.value, growth, peak: mem.peak_bytes });
    by.set(id, pts);
  }
  const series = [...by.entries()].sort(([a], [c]) => a.localeCompare(c)).map(([label, points]) => {
    points.sort((a, c) => a.seqLen - c.seqLen);
    const key = keys.get(label)!;
    return { implementation: key.implementation, label, group: `${key.model} · ${key.device}`, points,
      exponent: logSlope(points.map((p) => [p.seqLen, p.growth])) };
  });
  return { series, skipped };
}

/** One line on how a snapshot's attention was found (null for profiler sections): by the
 * collector's annotations, by stack frames (where, on which device, what stays unattributed), or
 * unknown, never a 0% share. */
export function attributionLine(mem: MemorySection): string | null {
  const a = mem.attribution;
  if (!a) return null;
  if (a.by === "unknown") return a.reason || "attention: unknown (this snapshot has no annotations and no attention frames)";
  if (a.by === "annotations") return "Attention found by the collector's annotations.";
  const parts = [`Attention found by its stack frames in ${(a.sites || []).join(", ") || "no site"}`];
  if (a.devices_with_attention?.length) parts.push(`ran on ${a.devices_with_attention.join(", ")}`);
  if (a.gqa_layers?.length) parts.push(`MQA/GQA (K/V heads repeated) in ${a.gqa_layers.join(", ")}`);
  if (a.unattributed_bwd_allocs) parts.push(`${a.unattributed_bwd_allocs} backward allocations (${fmtBytes(a.unattributed_bwd_bytes ?? 0)}) unattributed`);
  const ap = mem.attention_peak;
  if (ap) parts.push(`attention's own peak ${fmtBytes(ap.bytes)}${ap.share !== null ? ` (${fmtShare(ap.share)} of what was live then)` : ""}`);
  return parts.join("; ") + ".";
}

/** A layer's stages as "softmax 1.0 MiB · softmax (bwd) 512.0 KiB", largest first. */
export function layerStagesText(layer: MemorySection["layers"][number], top = 6): string {
  return (layer.stages || []).slice(0, top)
    .map((s) => `${stageLabel(s.stage)}${s.pass === "bwd" ? " (bwd)" : ""} ${fmtBytes(s.bytes_allocated)}`).join(" · ");
}

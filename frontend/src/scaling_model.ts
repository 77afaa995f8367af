// The Scaling view's model: runs as series over sequence length, with fitted exponents. Pure functions, no DOM,
// no fetch (tested in test/model.test.ts).

import { basisOf, n0, timeOf } from "./model";
import { num } from "./format";
import type { Report } from "./types";
import type { Basis } from "./tags";

export interface ScalingPoint {
  run: string;
  seqLen: number;
  usPerCall: number;
  scoreBytes: number | null;
  seqSource: "metadata" | "shape";
  /** Profiled steps with attention, and their per-call time's spread: (max − min) / median; null with one step. */
  steps: number;
  spread: number | null;
}

/** What a run is a point of: one model (layer type), on one device, in one implementation, on one time basis. */
export interface SeriesKey {
  model: string;
  device: string;
  implementation: string; // the engine's, "compiled" added when its layers ran under torch.compile
  variant: string | null; // the collector's variant name, when it gives one
  basis: Basis;
}

export interface ScalingSeries extends SeriesKey {
  key: string;
  label: string;
  points: ScalingPoint[];
  timeExponent: number | null;
  /** Why the time exponent says little (null: nothing found against it). */
  timeCaveat: string | null;
  memExponent: number | null;
}

export interface ScalingModel {
  series: ScalingSeries[];
  distinctLengths: number;
  skipped: { run: string; why: string }[];
}

/** The sequence length of a run: the collector's metadata, else the query length of its busiest layer. */
export function seqLenOf(report: Report): { value: number; source: "metadata" | "shape" } | null {
  const meta = report.metadata || {};
  for (const k of ["seq_len", "sequence_length", "seqlen"]) {
    const v = Number((meta as Record<string, unknown>)[k]);
    if (Number.isFinite(v) && v > 0) return { value: v, source: "metadata" };
  }
  const basis = basisOf(report);
  const withLen = (report.layers || []).filter((l) => num(l.shape?.q_len) !== null);
  if (!withLen.length) return null;
  const top = withLen.reduce((a, b) => (timeOf(b, basis) > timeOf(a, basis) ? b : a));
  return { value: top.shape!.q_len as number, source: "shape" };
}

/** The implementation most calls ran; the collector's variant name when it gives one and they agree. */
export function dominantImplementation(report: Report): string {
  const calls = new Map<string, number>();
  for (const i of report.implementations || []) {
    const impl = i.implementation || "unknown";
    calls.set(impl, (calls.get(impl) || 0) + n0(i.calls));
  }
  let best = "unknown";
  let n = -1;
  for (const [impl, c] of calls) if (c > n) { best = impl; n = c; }
  return best;
}

/** Which series a run belongs to: the collector's model name (else the layer type with the most time),
 *  the device, the dominant implementation (and whether torch.compile ran it), the variant, the time basis
 *  (GPU time for a trace with kernels, else CPU op time: never one for the other). */
export function seriesKeyOf(report: Report): SeriesKey {
  const meta = (report.metadata || {}) as Record<string, unknown>;
  const basis = basisOf(report);
  const impl = dominantImplementation(report);
  const layers = report.layers || [];
  const byType = new Map<string, number>();
  for (const l of layers) byType.set(l.layer_type || "attention", (byType.get(l.layer_type || "attention") || 0) + timeOf(l, basis));
  let type = "";
  let most = -1;
  for (const [t, v] of byType) if (v > most) { type = t; most = v; }
  const model = typeof meta.model === "string" && meta.model ? meta.model : type || "unknown model";
  const devName = report.device?.name || (typeof meta.device_name === "string" ? meta.device_name : "")
    || (typeof meta.device === "string" ? meta.device.toUpperCase() : "") || (basis === "cpu" ? "CPU" : "unknown device");
  const mine = layers.filter((l) => (l.implementation || "unknown") === impl);
  const compiled = mine.length > 0 && mine.filter((l) => l.compiled).length * 2 > mine.length;
  const variant = typeof meta.variant === "string" && meta.variant ? meta.variant : null;
  return { model, device: devName, implementation: compiled && impl !== "compiled" ? `${impl} compiled` : impl, variant, basis };
}

export function seriesLabel(k: SeriesKey): string {
  const impl = k.variant && k.variant !== k.implementation ? `${k.variant} (${k.implementation})` : k.implementation;
  return `${impl} · ${k.model} · ${k.device}`;
}

/** Slope of log(y) over log(x) by least squares: ~2 for quadratic growth, ~1 for linear. */
export function logSlope(points: [number, number][]): number | null {
  return logFit(points)?.slope ?? null;
}

/** Least squares on log(y) over log(x): slope (2 decimals) and R² (1 when the points lie on a line). */
export function logFit(points: [number, number][]): { slope: number; r2: number | null } | null {
  const ps = points.filter(([x, y]) => x > 0 && y > 0);
  if (new Set(ps.map(([x]) => x)).size < 2) return null;
  const xs = ps.map(([x]) => Math.log(x));
  const ys = ps.map(([, y]) => Math.log(y));
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < xs.length; i++) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
    syy += (ys[i] - my) ** 2;
  }
  if (!(sxx > 0)) return null;
  return { slope: Math.round((sxy / sxx) * 100) / 100, r2: syy > 0 ? (sxy * sxy) / (sxx * syy) : null };
}

/** Per-call attention time of each profiled step with attention, on ``basis``. */
function perCallBySteps(report: Report, basis: Basis): number[] {
  return (report.steps || []).filter((s) => s.step >= 0 && n0(s.calls) > 0)
    .map((s) => n0(basis === "gpu" ? s.attention_gpu_us : s.attention_cpu_us) / n0(s.calls));
}

function median(xs: number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

/** As the sweep does (sweeps/analysis.NOISY_IQR, torch.utils.benchmark's mark): a spread above this is noise. */
export const NOISY_SPREAD = 0.1;
/** Below this R² the points do not lie on a line in log–log, so no single exponent describes them. */
export const MIN_R2 = 0.9;
export const MIN_FIT_LENGTHS = 3;

/** Why a time exponent fitted to ``points`` says little, or null when nothing speaks against it. */
export function timeFitCaveat(points: ScalingPoint[], r2: number | null): string | null {
  const lengths = new Set(points.map((p) => p.seqLen)).size;
  if (lengths < MIN_FIT_LENGTHS) return `${lengths} lengths only: any two points fit a line; profile ${MIN_FIT_LENGTHS} or more`;
  const single = points.filter((p) => p.steps < 2);
  if (single.length) {
    return `${single.length === points.length ? "every run has" : `${single.length} of ${points.length} runs have`} one profiled step: `
      + "its noise is unknown (profile 3 or more active steps)";
  }
  const noisy = points.filter((p) => p.spread !== null && p.spread > NOISY_SPREAD);
  if (noisy.length) {
    const worst = noisy.reduce((a, b) => ((b.spread ?? 0) > (a.spread ?? 0) ? b : a));
    return `noisy: per-step time varies by ${Math.round(100 * (worst.spread ?? 0))}% of its median in ${worst.run}`;
  }
  if (r2 !== null && r2 < MIN_R2) return `the points do not lie on a line (R² ${r2.toFixed(2)}): no single exponent describes them`;
  return null;
}

export function scalingModel(items: { run: string; report: Report }[]): ScalingModel {
  const skipped: { run: string; why: string }[] = [];
  const bySeries = new Map<string, { key: SeriesKey; points: ScalingPoint[] }>();
  for (const { run, report } of items) {
    const calls = n0(report.calls);
    if (calls <= 0) { skipped.push({ run, why: "no attention calls" }); continue; }
    const len = seqLenOf(report);
    if (!len) { skipped.push({ run, why: "no sequence length in its metadata or shapes" }); continue; }
    const key = seriesKeyOf(report);
    const att = n0(key.basis === "gpu" ? report.attention_gpu_us : report.attention_cpu_us);
    const scores = (report.layers || []).map((l) => num(l.score_bytes)).filter((v): v is number => v !== null);
    const steps = perCallBySteps(report, key.basis);
    const mid = steps.length ? median(steps) : 0;
    const id = JSON.stringify([key.model, key.device, key.variant ?? key.implementation, key.implementation, key.basis]);
    const entry = bySeries.get(id) || { key, points: [] };
    entry.points.push({ run, seqLen: len.value, usPerCall: att / calls, scoreBytes: scores.length ? Math.max(...scores) : null,
      seqSource: len.source, steps: steps.length,
      spread: steps.length >= 2 && mid > 0 ? (Math.max(...steps) - Math.min(...steps)) / mid : null });
    bySeries.set(id, entry);
  }
  const series = [...bySeries.entries()].map(([id, { key, points }]) => {
    points.sort((a, b) => a.seqLen - b.seqLen || a.run.localeCompare(b.run));
    const fit = logFit(points.map((p) => [p.seqLen, p.usPerCall]));
    return {
      ...key, key: id, label: seriesLabel(key), points,
      timeExponent: fit?.slope ?? null,
      timeCaveat: fit ? timeFitCaveat(points, fit.r2) : null,
      memExponent: logSlope(points.filter((p) => p.scoreBytes !== null).map((p) => [p.seqLen, p.scoreBytes as number])),
    };
  }).sort((a, b) => a.label.localeCompare(b.label));
  const distinctLengths = new Set(series.flatMap((s) => s.points.map((p) => p.seqLen))).size;
  return { series, distinctLengths, skipped };
}

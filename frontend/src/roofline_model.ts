// The roofline's data, shaped for the Roofline view and Compare: points per layer type and stage,
// the device roofs as polylines on log-log axes, and the speed-up decomposition rows. Pure functions,
// unit-tested in test/roofline_model.test.ts. The JSON is the report's `roofline` section (docs/api.md).

import { BOUND_COLOR, runColors } from "./colors";
import type { CompareDoc } from "./route_types";
import type { Report } from "./types";

export type Bound = "compute" | "memory" | "launch" | null;

export interface RoofPoint {
  flops: number;
  bytes: number;
  time_us: number;
  units: number;
  intensity: number | null;
  achieved_tflops: number | null;
  achieved_tbs: number | null;
  precision?: string;
  peak_tflops?: number | null;
  bandwidth_tbs?: number | null;
  attainable_tflops: number | null;
  fraction: number | null;
  bandwidth_fraction?: number | null;
  mean_unit_us?: number | null;
  bound: Bound;
  bound_reason: string;
}

export interface RoofStage extends RoofPoint {
  stage: string;
  pass: "fwd" | "bwd";
}

export interface RoofLayer extends RoofPoint {
  layer_type: string;
  implementation: string;
  /** "Owlv2Attention (eager)", with ", L 5185×5185" when the layer type has several length classes. */
  label?: string;
  lengths_text?: string | null;
  calls: number;
  dtype?: string | null;
  score_bytes: number | null;
  stages: RoofStage[];
  dominant_stage: string | null;
  line: string;
  unmodelled_stages?: string[];
}

export interface Roof {
  kind: "datasheet" | "measured";
  device: string | null;
  source: string | null;
  method?: string;
  measured_at?: string | null;
  runs?: number | null;
  note?: string;
  remeasure?: string;
  override?: string;
  tflops: Record<string, number | null>;
  bandwidth_tbs: number | null;
}

export interface RooflineSection {
  roof: Roof | null;
  time_basis: "gpu" | "cpu";
  convention?: Record<string, string>;
  layers: RoofLayer[];
  layers_omitted?: number;
  above_roof?: string;
}

/** What the roof note says: where the roof comes from, when and how it was measured, how to re-measure it. */
export function roofNoteText(roof: Roof | null): string {
  if (!roof) return "No peak or bandwidth is known for this device: points without a roof.";
  let out = `${roof.kind === "measured" ? "Measured" : "Data-sheet"} roof: ${roof.source || roof.device}`
    + (roof.method ? ` (${roof.method})` : "");
  if (roof.kind !== "measured") return out;
  out += roof.measured_at ? `; measured ${roof.measured_at}` : "; when measured: not recorded (an older collector)";
  if (roof.override) out += `; from ${roof.override} (--roof / TB_ATTN_ROOF), not the trace's own`;
  if (roof.note) out += `; ${roof.note}`;
  return `${out}. Re-measure: ${roof.remeasure || "python -m tb_attn_plugin.collector.peaks --device cpu --out roof-cpu.json"}`
    + ", then read old traces with tb-attn report --roof FILE.";
}

/** A fraction of the roof as a percent; above 1 the roof is wrong, so never "800%". */
export function fractionText(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (v > 1) return "above the roof";
  return `${(v * 100).toFixed(v < 0.1 ? 1 : 0)}%`;
}

export const PART_ORDER = ["memory", "compute", "launch", "cpu", "rest"] as const;
export const PART_LABEL: Record<string, string> = {
  memory: "Memory traffic", compute: "Compute efficiency", launch: "Kernel launches", cpu: "CPU-side overhead",
  rest: "Rest (projections, copies, unmodelled)",
};

const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

export function rooflineOf(report: Report | null | undefined): RooflineSection | null {
  const rf = (report as { roofline?: unknown } | null | undefined)?.roofline;
  if (!rf || typeof rf !== "object" || !Array.isArray((rf as RooflineSection).layers)) return null;
  return rf as RooflineSection;
}

export interface ChartPoint {
  run: string;
  label: string;
  layerType: string;
  implementation: string;
  stage: string | null;
  pass: string | null;
  x: number;
  y: number;
  attainable: number | null;
  tbs: number | null;
  fraction: number | null;
  bound: Bound;
  reason: string;
  timeUs: number;
  precision: string;
}

export interface RoofLine {
  run: string;
  runs: string[];
  device: string | null;
  label: string;
  kind: string;
  peak: number;
  bandwidth: number;
  ridge: number;
  precision: string;
  /** [[x, y], ...]: the slanted memory roof up to the ridge point, then flat at the peak. */
  line: [number, number][];
}

export interface RooflineChart {
  points: ChartPoint[];
  roofs: RoofLine[];
  xRange: [number, number];
  yRange: [number, number];
  notes: string[];
}

/** The precision whose peak a run's roof is drawn at: that of its slowest layer (the report's choice). */
function roofPrecision(rf: RooflineSection): string {
  return rf.layers.find((l) => l.precision)?.precision || "bf16";
}

function peakOf(roof: Roof, precision: string): number | null {
  const order: Record<string, string[]> = { fp8: ["fp8", "fp16", "bf16"], bf16: ["bf16", "fp16"], fp16: ["fp16", "bf16"], tf32: ["tf32", "fp32"], fp32: ["fp32"] };
  for (const p of order[precision] || [precision]) {
    const v = roof.tflops?.[p];
    if (finite(v) && v > 0) return v;
  }
  return null;
}

/** Points (one per layer type × implementation, and per stage when ``stages``) and roofs of several runs. */
export function rooflineChart(items: { run: string; report: Report }[], stages = false): RooflineChart {
  const points: ChartPoint[] = [];
  const roofs: RoofLine[] = [];
  const notes: string[] = [];
  for (const { run, report } of items) {
    const rf = rooflineOf(report);
    if (!rf) {
      notes.push(`${run}: no roofline in this report (analysed by an older tb-attn?)`);
      continue;
    }
    const prefix = items.length > 1 ? `${run}: ` : "";
    for (const l of rf.layers) {
      const rows: (RoofPoint & { stage?: string; pass?: string })[] = stages ? l.stages : [l];
      for (const p of rows) {
        if (!finite(p.intensity) || !finite(p.achieved_tflops) || p.intensity <= 0 || p.achieved_tflops <= 0) continue;
        const where = p.stage ? ` ${p.stage}${p.pass === "bwd" ? " (bwd)" : ""}` : "";
        points.push({
          run, label: `${prefix}${l.label || `${l.layer_type} (${l.implementation})`}${where}`, layerType: l.layer_type,
          implementation: l.implementation, stage: p.stage ?? null, pass: p.pass ?? null, x: p.intensity, y: p.achieved_tflops,
          attainable: finite(p.attainable_tflops) ? p.attainable_tflops : null, tbs: finite(p.achieved_tbs) ? p.achieved_tbs : null,
          fraction: finite(p.fraction) ? p.fraction : null, bound: p.bound ?? null, reason: p.bound_reason || "", timeUs: p.time_us,
          precision: p.precision || "",
        });
      }
    }
    const roof = rf.roof;
    if (!roof) {
      notes.push(`${run}: no peak or bandwidth known for this device, so no roof is drawn`);
      continue;
    }
    const precision = roofPrecision(rf);
    const peak = peakOf(roof, precision);
    const bw = roof.bandwidth_tbs;
    if (!peak || !finite(bw) || bw <= 0) {
      notes.push(`${run}: the ${roof.kind} roof lacks a peak or a bandwidth`);
      continue;
    }
    // Runs on the same device share one roof; its label names them all.
    const same = roofs.find((r) => r.peak === peak && r.bandwidth === bw && r.kind === roof.kind && r.device === roof.device);
    if (same) {
      same.runs.push(run);
      same.label = `${same.runs.join(", ")}: ${roofText(roof.device, roof.kind, peak, precision, bw)}`;
      continue;
    }
    const label = `${prefix}${roofText(roof.device, roof.kind, peak, precision, bw)}`;
    roofs.push({ run, runs: [run], label, kind: roof.kind, device: roof.device, peak, bandwidth: bw, ridge: peak / bw, precision, line: [] });
  }
  const xs = [...points.map((p) => p.x), ...roofs.map((r) => r.ridge)];
  const ys = [...points.map((p) => p.y), ...roofs.map((r) => r.peak)];
  const xRange: [number, number] = xs.length ? [decadeDown(Math.min(...xs) / 2), decadeUp(Math.max(...xs) * 2)] : [0.1, 1000];
  const yRange: [number, number] = ys.length ? [decadeDown(Math.min(...ys) / 2), decadeUp(Math.max(...ys) * 2)] : [0.001, 1000];
  for (const r of roofs) {
    const x0 = xRange[0];
    const start: [number, number] = [x0, x0 * r.bandwidth];
    r.line = [start, [r.ridge, r.peak], [xRange[1], r.peak]];
  }
  return { points, roofs, xRange, yRange, notes };
}

const sig4 = (v: number): string => Number(v.toPrecision(4)).toString();

function roofText(device: string | null, kind: string, peak: number, precision: string, bw: number): string {
  return `${device || "device"} (${kind}): ${sig4(peak)} TFLOP/s ${precision}, ${bw >= 0.1 ? `${sig4(bw)} TB/s` : `${sig4(bw * 1000)} GB/s`}`;
}

function decadeDown(v: number): number {
  return v > 0 ? 10 ** Math.floor(Math.log10(v)) : 0.001;
}

function decadeUp(v: number): number {
  return v > 0 ? 10 ** Math.ceil(Math.log10(v)) : 1000;
}

export interface DecompositionModel {
  sentence: string;
  basis: "gpu" | "cpu";
  runs: string[];
  rows: { part: string; label: string; us: number; share: number | null }[];
  measuredUs: number;
  sumUs: number;
}

/** The compare document's decomposition as rows in a fixed order; null when the backend gave none. */
export function decompositionModel(doc: CompareDoc | null | undefined): DecompositionModel | null {
  const d = doc?.decomposition;
  if (!d || typeof d !== "object" || !d.parts_us) return null;
  const measured = finite(d.measured_us) ? d.measured_us : 0;
  const rows = PART_ORDER.map((p) => {
    const us = finite(d.parts_us[p]) ? d.parts_us[p] : 0;
    const label = p === "launch" && d.basis === "cpu" ? "Op dispatch" : PART_LABEL[p];
    return { part: p, label, us, share: measured ? us / measured : null };
  });
  return { sentence: d.sentence || "", basis: d.basis, runs: d.runs, rows, measuredUs: measured,
    sumUs: rows.reduce((a, r) => a + r.us, 0) };
}

/** One scatter series of the roofline chart: a run's points of one bound. */
export interface PointSeries { name: string; run: string; bound: string; color: string; symbol: string; points: ChartPoint[] }

const BOUND_SYMBOLS: Record<string, string> = { memory: "circle", compute: "diamond", launch: "triangle", none: "rect" };
const RUN_SYMBOLS = ["circle", "diamond", "triangle", "rect", "pin"];

/** The chart's series. One run: coloured by what bounds each point (BOUND_COLOR), as the legend says.
 * Several runs (Compare): each run in its own colour (runColors, by the page's run order, the colour its
 * totals row has) and the bound told by the marker, so two runs bound alike are not one blue. */
export function pointSeries(m: RooflineChart, pageRuns: string[] = []): PointSeries[] {
  const runs = [...new Set([...pageRuns.filter((r) => m.points.some((p) => p.run === r)), ...m.points.map((p) => p.run)])];
  const bounds = [...new Set(m.points.map((p) => p.bound || "none"))];
  const colors = runColors([...pageRuns, ...runs]);
  const out: PointSeries[] = [];
  for (const b of bounds) {
    for (const [ri, run] of runs.entries()) {
      const points = m.points.filter((p) => (p.bound || "none") === b && p.run === run);
      if (!points.length) continue;
      out.push(runs.length > 1
        ? { name: `${run}: ${b}-bound`, run, bound: b, color: colors.get(run)!, symbol: BOUND_SYMBOLS[b] ?? "rect", points }
        : { name: `${b}-bound`, run, bound: b, color: BOUND_COLOR[b] ?? BOUND_COLOR.none, symbol: RUN_SYMBOLS[ri % RUN_SYMBOLS.length], points });
    }
  }
  return out;
}

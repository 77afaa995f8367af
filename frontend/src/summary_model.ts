// The Summary view's model: a report's headline figures, layers, badges and verdicts. Pure functions, no DOM, no
// fetch (tested in test/model.test.ts).

import { basisOf, implementationBadges, n0, stageIndex, timeOf } from "./model";
import type { Badge } from "./model";
import { num } from "./format";
import type { Layer, Report } from "./types";
import type { Basis, Pass } from "./tags";

export interface SummaryModel {
  device: string;
  deviceDetail: string;
  peakTflops: number | null;
  basis: Basis;
  steps: number;
  calls: number;
  attentionUs: number;
  totalUs: number;
  share: number | null;
  badges: Badge[];
  verdicts: { id: string; severity: string; message: string }[];
  layerTypes: {
    layerType: string;
    implementation: string;
    calls: number;
    us: number;
    tflops: number | null;
    peakPct: number | null;
    scoreBytes: number | null;
    shape: string;
  }[];
  stages: { stage: string; pass: Pass; us: number; share: number }[];
  empty: boolean;
  metadata: [string, string][];
}

const SEVERITY_ORDER: Record<string, number> = { error: 0, warn: 1, info: 2 };

export function shapeText(shape: Layer["shape"]): string {
  if (!shape) return "";
  const b = num(shape.batch);
  const h = num(shape.q_heads);
  const bh = num(shape.batch_heads);
  const lq = num(shape.q_len);
  const lk = num(shape.k_len);
  const d = num(shape.head_dim);
  const parts: string[] = [];
  if (b !== null && h !== null) parts.push(`B=${b} H=${h}`);
  else if (bh !== null) parts.push(`B·H=${bh}`);
  if (lq !== null) parts.push(lk !== null && lk !== lq ? `Lq=${lq} Lk=${lk}` : `L=${lq}`);
  if (d !== null) parts.push(`D=${d}`);
  return parts.join(" ");
}

export function summaryModel(report: Report): SummaryModel {
  const basis = basisOf(report);
  const dev = report.device || null;
  const peak = num(dev?.peak_tflops);
  const attentionUs = n0(basis === "gpu" ? report.attention_gpu_us : report.attention_cpu_us);
  const totalUs = n0(basis === "gpu" ? report.total_gpu_us : report.total_cpu_us);
  const share = num(report.attention_share) ?? (totalUs > 0 ? attentionUs / totalUs : null);
  const details = [
    dev?.vendor, dev?.compute_capability ? `compute ${dev.compute_capability}` : "",
    dev?.sm_count ? `${dev.sm_count} SMs` : "", peak !== null ? `peak ${peak} TFLOP/s (dense 16-bit)` : "",
  ].filter(Boolean);

  // Without a data-sheet peak (a CPU), the roof the roofline used for this layer type (the collector's
  // measurement) is the peak: the table then says what the roofline verdict says, not "peak unknown".
  const roofRows = ((report as { roofline?: { layers?: { layer_type: string; peak_tflops?: number | null }[] } })
    .roofline?.layers) || [];
  const roofPeak = (layerType: string): number | null => num(roofRows.find((r) => r.layer_type === layerType)?.peak_tflops);

  // Per layer type: the layer with the most time stands for its type's TFLOP/s and shape.
  const byType = new Map<string, Layer[]>();
  for (const l of report.layers || []) {
    const lt = l.layer_type || l.layer;
    byType.set(lt, [...(byType.get(lt) || []), l]);
  }
  const layerTypes = [...byType.entries()].map(([layerType, ls]) => {
    const top = ls.reduce((a, b) => (timeOf(b, basis) > timeOf(a, basis) ? b : a));
    const impls = [...new Set(ls.map((l) => l.implementation || "unknown"))].sort();
    const tflops = num(top.tflops);
    const scores = ls.map((l) => num(l.score_bytes)).filter((v): v is number => v !== null);
    return {
      layerType,
      implementation: impls.join("+"),
      calls: ls.reduce((s, l) => s + n0(l.calls), 0),
      us: ls.reduce((s, l) => s + timeOf(l, basis), 0),
      tflops,
      peakPct: tflops !== null && (peak ?? roofPeak(layerType)) ? (100 * tflops) / (peak ?? roofPeak(layerType))! : null,
      scoreBytes: scores.length ? Math.max(...scores) : null,
      shape: shapeText(top.shape),
    };
  }).sort((a, b) => b.us - a.us);

  const stageAcc = new Map<string, { stage: string; pass: Pass; us: number }>();
  for (const s of report.stages || []) {
    const pass: Pass = s.pass === "bwd" ? "bwd" : "fwd";
    const k = `${pass}:${s.stage}`;
    const row = stageAcc.get(k) || { stage: s.stage, pass, us: 0 };
    row.us += timeOf(s, basis);
    stageAcc.set(k, row);
  }
  const stageSum = [...stageAcc.values()].reduce((s, r) => s + r.us, 0);
  const stages = [...stageAcc.values()]
    .filter((r) => r.us > 0)
    .map((r) => ({ ...r, share: stageSum > 0 ? r.us / stageSum : 0 }))
    .sort((a, b) => (a.pass === b.pass ? stageIndex(a.stage) - stageIndex(b.stage) : a.pass === "fwd" ? -1 : 1));

  const metadata: [string, string][] = Object.entries(report.metadata || {})
    .filter(([, v]) => v !== null && v !== undefined && typeof v !== "object")
    .map(([k, v]) => [k, String(v)]);

  return {
    device: dev?.name || (basis === "cpu" ? "CPU only (no GPU kernels in this trace)" : "unknown device"),
    deviceDetail: details.join(" · "),
    peakTflops: peak,
    basis,
    steps: (report.steps || []).filter((s) => num(s.step) !== null && (s.step as number) >= 0).length,
    calls: n0(report.calls),
    attentionUs,
    totalUs,
    share,
    badges: implementationBadges(report),
    verdicts: (report.verdicts || [])
      .map((v) => ({ id: v.id, severity: v.severity || "info", message: v.message }))
      .sort((a, b) => (SEVERITY_ORDER[a.severity] ?? 3) - (SEVERITY_ORDER[b.severity] ?? 3)),
    layerTypes,
    stages,
    empty: n0(report.calls) === 0 && !(report.layers || []).length,
    metadata,
  };
}

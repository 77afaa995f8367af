// Data shaping: the backend's JSON in, what each view draws out. Pure functions, no DOM, no fetch,
// so every view's numbers are unit-tested (test/model.test.ts). Robust to missing optional fields:
// a missing number is 0 where it is summed and null where it is shown.

import { sweepOfRun } from "./sweep_runs";
import { fmtSpan, num } from "./format";
import { baseImplementation, implColor, STAGE_COLOR, stageColor } from "./colors";

import type { CompareDoc, RunsDoc, SpanInfo } from "./route_types";
import type { Basis, Kernel, Layer, Pass, Report, StageRow } from "./types";
import { STAGES } from "./types"; // the tag format's stages in order, generated from format/tags.py


export const STAGE_LABEL: Record<string, string> = {
  qkv_proj: "QKV projection",
  qk_matmul: "QKᵀ matmul",
  scale_mask: "scale & mask",
  softmax: "softmax",
  dropout: "dropout",
  av_matmul: "AV matmul",
  out_proj: "output projection",
  fused: "fused attention",
  quantize: "quantize (Q, K to int8/fp8)",
  kv_cache_write: "KV-cache write",
  preprocess: "preprocess (backward)",
  split_kv_reduce: "split-KV reduce / combine",
  postprocess: "postprocess (backward)",
  other: "other (copies, layout)",
  call: "call (wrapper ops)", // the one-call timeline's ops that hold the call's other ops (timeline_model.ts)
};

export function stageLabel(stage: string | undefined): string {
  return (stage && STAGE_LABEL[stage]) || stage || "unknown";
}

export function stageIndex(stage: string | undefined): number {
  const i = STAGES.indexOf((stage || "") as (typeof STAGES)[number]);
  return i < 0 ? STAGES.length : i;
}

const n0 = (v: unknown): number => num(v) ?? 0;

// ---- implementations --------------------------------------------------------------------------

export type ImplKind = "fused" | "math" | "eager" | "compiled" | "unknown";

const FUSED = new Set([
  "flash", "efficient", "cudnn", "aotriton", "ck", "flash_attn", "flex", "serving", "cpu_fused", "fused", "aiter",
  "flashinfer", "flash_mla", "sage", "xformers", "triton_attention", "te", "custom",
]);

export function implKind(impl: string | undefined | null): ImplKind {
  if (!impl) return "unknown";
  // "cpu_fused compiled" (a series of torch.compile'd runs, seriesKeyOf) is of cpu_fused's kind, as it is of its colour.
  const parts = baseImplementation(impl).impl.split("+");
  if (parts.some((p) => p === "math")) return "math";
  if (parts.some((p) => p === "eager" || p === "mha_fastpath")) return "eager";
  if (parts.every((p) => FUSED.has(p))) return "fused";
  if (parts.some((p) => p === "compiled" || p === "triton" || p === "inductor")) return "compiled";
  return "unknown";
}

export interface Badge {
  layerType: string;
  implementation: string;
  kind: ImplKind;
  calls: number;
  compiled: boolean;
}

/** One badge per (layer type, implementation), most calls first; "compiled" rides along as a flag. */
export function implementationBadges(report: Report): Badge[] {
  const compiledTypes = new Set(
    (report.layers || []).filter((l) => l.compiled).map((l) => l.layer_type || l.layer),
  );
  const rows = (report.implementations || []).map((i) => {
    const layerType = i.layer_type || "attention";
    const implementation = i.implementation || "unknown";
    return {
      layerType, implementation, kind: implKind(implementation), calls: n0(i.calls),
      compiled: compiledTypes.has(layerType),
    };
  });
  if (!rows.length) {
    // Older reports: derive from layers.
    const acc = new Map<string, Badge>();
    for (const l of report.layers || []) {
      const lt = l.layer_type || l.layer;
      const impl = l.implementation || "unknown";
      const k = `${lt}\u0000${impl}`;
      const b = acc.get(k) || { layerType: lt, implementation: impl, kind: implKind(impl), calls: 0, compiled: false };
      b.calls += n0(l.calls);
      b.compiled = b.compiled || !!l.compiled;
      acc.set(k, b);
    }
    rows.push(...acc.values());
  }
  return rows.sort((a, b) => b.calls - a.calls || a.layerType.localeCompare(b.layerType));
}

// ---- runs -----------------------------------------------------------------------------------

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

// ---- summary --------------------------------------------------------------------------------

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

export function basisOf(report: Report): Basis {
  return report.time_basis === "cpu" ? "cpu" : "gpu";
}

export function timeOf(row: { gpu_us?: number; cpu_us?: number } | undefined, basis: Basis): number {
  if (!row) return 0;
  return n0(basis === "gpu" ? row.gpu_us : row.cpu_us);
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

// ---- stages by layer ---------------------------------------------------------------------------

export interface StagesByLayer {
  layers: string[];
  layerTypes: string[];
  implementations: string[];
  series: { stage: string; label: string; color: string; values: number[] }[];
  totals: number[];
}

/** Layers in trace order (their numeric suffix), stages as stacks, for one pass and one time basis. */
export function stagesByLayer(report: Report, pass: Pass, basis: Basis): StagesByLayer {
  const layers = [...(report.layers || [])].sort(layerOrder);
  const present = new Set<string>();
  for (const l of layers) for (const s of l.stages || []) {
    if ((s.pass || "fwd") === pass && timeOf(s, basis) > 0) present.add(s.stage);
  }
  const stages = [...present].sort((a, b) => stageIndex(a) - stageIndex(b));
  const series = stages.map((stage) => ({
    stage,
    label: stageLabel(stage),
    color: stageColor(stage),
    values: layers.map((l) => round3(
      (l.stages || []).filter((s) => s.stage === stage && (s.pass || "fwd") === pass)
        .reduce((acc, s) => acc + timeOf(s, basis), 0),
    )),
  }));
  const totals = layers.map((_, i) => round3(series.reduce((acc, s) => acc + s.values[i], 0)));
  return {
    layers: layers.map((l) => l.layer),
    layerTypes: layers.map((l) => l.layer_type || l.layer),
    implementations: layers.map((l) => l.implementation || "unknown"),
    series,
    totals,
  };
}

function round3(v: number): number {
  return Math.round(v * 1000) / 1000;
}

function layerOrder(a: Layer, b: Layer): number {
  const sa = splitSuffix(a.layer);
  const sb = splitSuffix(b.layer);
  return sa[0] === sb[0] ? sa[1] - sb[1] : sa[0].localeCompare(sb[0]) || 0;
}

function splitSuffix(name: string): [string, number] {
  const m = /^(.*?)[_#](\d+)$/.exec(name || "");
  return m ? [m[1], Number(m[2])] : [name || "", 0];
}

export interface LayerDetail {
  layer: Layer;
  sampleId: number | null;
  /** "layer": kernels over all the layer's calls; "sample": only its first call's (older reports). */
  kernelScope: "layer" | "sample";
  stages: { stage: string; pass: Pass; gpu_us: number; cpu_us: number; kernels: number }[];
  kernels: { name: string; stage: string; pass: Pass; count: number; us: number }[];
}

/**
 * One layer's stages and kernels: the layer's own kernel list over all its calls when the report
 * has one, else the kernels of its call sample (the layer's first call).
 */
export function layerDetail(report: Report, layerName: string): LayerDetail | null {
  const layer = (report.layers || []).find((l) => l.layer === layerName);
  if (!layer) return null;
  const sample = (report.call_samples || []).find((c) => c.layer === layerName) || null;
  const acc = new Map<string, { name: string; stage: string; pass: Pass; count: number; us: number }>();
  for (const e of sample?.events || []) {
    if (e.kind !== "kernel") continue;
    const pass: Pass = e.pass === "bwd" ? "bwd" : "fwd";
    const k = `${e.name}\u0000${e.stage}\u0000${pass}`;
    const row = acc.get(k) || { name: e.name, stage: e.stage || "other", pass, count: 0, us: 0 };
    row.count += 1;
    row.us = round3(row.us + n0(e.dur_us));
    acc.set(k, row);
  }
  const own = Array.isArray(layer.kernels) ? layer.kernels : null;
  const kernels = own
    ? own.map((k) => ({
      name: k.name, stage: k.stage || "other", pass: (k.pass === "bwd" ? "bwd" : "fwd") as Pass,
      count: n0(k.count), us: n0(k.gpu_us),
    }))
    : [...acc.values()];
  return {
    layer,
    sampleId: sample ? sample.id : null,
    kernelScope: own ? "layer" : "sample",
    stages: (layer.stages || [])
      .map((s) => ({
        stage: s.stage, pass: (s.pass === "bwd" ? "bwd" : "fwd") as Pass,
        gpu_us: n0(s.gpu_us), cpu_us: n0(s.cpu_us), kernels: n0(s.kernels),
      }))
      .filter((s) => s.gpu_us > 0 || s.cpu_us > 0)
      .sort((a, b) => (a.pass === b.pass ? stageIndex(a.stage) - stageIndex(b.stage) : a.pass === "fwd" ? -1 : 1)),
    kernels: kernels.sort((a, b) => stageIndex(a.stage) - stageIndex(b.stage) || b.us - a.us),
  };
}

// ---- kernels by stage --------------------------------------------------------------------------

export type KernelSort = "name" | "count" | "total" | "mean" | "share";

export interface KernelRow {
  name: string;
  stage: string;
  pass: Pass;
  implementation: string;
  count: number;
  total: number;
  mean: number;
  share: number | null;
}

export interface KernelGroup {
  stage: string;
  pass: Pass;
  label: string;
  color: string;
  rows: KernelRow[];
  count: number;
  total: number;
  share: number | null;
}

/** A row of the kernels table: a kernel of the report, or on a CPU trace an op shown as one (an op has
 * no implementation and no fingerprint). */
export type TableKernel = Pick<Kernel, "name" | "stage" | "pass" | "count" | "gpu_us">
  & Partial<Pick<Kernel, "implementation" | "fingerprint">>;

/**
 * Kernels grouped by (pass, stage) in pipeline order; rows filtered by a case-insensitive substring
 * of the name or stage, and sorted within each group. Share is of attention time.
 */
export function kernelGroups(
  kernels: TableKernel[] | undefined,
  opts: { filter?: string; sort?: KernelSort; desc?: boolean; attentionUs?: number; pass?: Pass | "all" } = {},
): KernelGroup[] {
  const filter = (opts.filter || "").trim().toLowerCase();
  const sort = opts.sort || "total";
  const desc = opts.desc ?? sort !== "name";
  const att = n0(opts.attentionUs);
  const groups = new Map<string, KernelGroup>();
  for (const k of kernels || []) {
    const pass: Pass = k.pass === "bwd" ? "bwd" : "fwd";
    if (opts.pass && opts.pass !== "all" && pass !== opts.pass) continue;
    const stage = k.stage || "other";
    const name = String(k.name ?? "");
    if (filter && !name.toLowerCase().includes(filter) && !stage.includes(filter)
      && !(k.implementation || "").toLowerCase().includes(filter)) continue;
    const count = n0(k.count);
    const total = n0(k.gpu_us);
    const row: KernelRow = {
      name, stage, pass, implementation: k.implementation || "", count, total,
      mean: count > 0 ? total / count : 0, share: att > 0 ? total / att : null,
    };
    const key = `${pass}:${stage}`;
    const g = groups.get(key) || {
      stage, pass, label: stageLabel(stage), color: stageColor(stage), rows: [], count: 0, total: 0, share: null,
    };
    g.rows.push(row);
    g.count += count;
    g.total += total;
    groups.set(key, g);
  }
  const cmp = (a: KernelRow, b: KernelRow): number => {
    let c: number;
    switch (sort) {
      case "name": c = a.name.localeCompare(b.name); break;
      case "count": c = a.count - b.count; break;
      case "mean": c = a.mean - b.mean; break;
      default: c = a.total - b.total;
    }
    return (desc ? -c : c) || a.name.localeCompare(b.name);
  };
  const out = [...groups.values()];
  for (const g of out) {
    g.rows.sort(cmp);
    g.total = round3(g.total);
    g.share = att > 0 ? g.total / att : null;
  }
  return out.sort((a, b) => (a.pass === b.pass ? stageIndex(a.stage) - stageIndex(b.stage) : a.pass === "fwd" ? -1 : 1));
}

// ---- compare ---------------------------------------------------------------------------------

export interface CompareModel {
  runs: string[];
  basis: Basis;
  headlines: string[];
  backendSummary: string;
  chart: { categories: string[]; series: { run: string; values: number[] }[] };
  stageRows: { label: string; stage: string; pass: Pass; values: number[]; delta: number; pct: number | null }[];
  layerRows: { layerType: string; values: number[]; implementations: (string | null)[]; delta: number; pct: number | null }[];
  onlyIn: { run: string; count: number; kernels: { name: string; stage: string; gpu_us: number; count: number | null }[] }[];
  totals: { run: string; us: number; share: number | null; implementations: string[]; calls: number | null }[];
}

function implSet(impls: { implementation?: string }[] | undefined): string[] {
  return [...new Set((impls || []).map((i) => i.implementation || "").filter(Boolean))].sort();
}

/** "B: attention −71%: one fused flash kernel per call replaces QKᵀ matmul, softmax, AV matmul" */
export function compareHeadline(doc: CompareDoc, index: number): string {
  const basis: Basis = doc.time_basis === "cpu" ? "cpu" : "gpu";
  const totals = doc.totals || [];
  const first = totals[0];
  const cur = totals[index];
  if (!first || !cur) return "";
  const key = basis === "gpu" ? "attention_gpu_us" : "attention_cpu_us";
  const a0 = n0(first[key]);
  const a1 = n0(cur[key]);
  // Only the last run is tested against the first; a percentage is said after whether it is noise.
  const noise = doc.noise && index === totals.length - 1 ? doc.noise
    : totals.length > 2 ? { verdict: "cannot_tell", headline: "not tested against noise (only the last run is)" } : null;
  let line = (doc.differences || []).map((d) => `${d}; `).join("") + `${cur.run}: `;
  if (noise && noise.verdict !== "beyond_noise") line += `${noise.headline}: `;
  line += "attention ";
  if (a0 > 0) {
    const pct = (100 * (a1 - a0)) / a0;
    const r = Math.round(pct);
    line += r === 0 ? "unchanged" : `${r > 0 ? "+" : "\u2212"}${Math.abs(r)}%`;
  } else {
    line += a1 > 0 ? "new" : "none in either run";
  }
  line += ` (${basis.toUpperCase()} time)`;
  const i0 = implSet(first.implementations);
  const i1 = implSet(cur.implementations);
  const fused1 = i1.filter((i) => implKind(i) === "fused");
  const unfused0 = i0.some((i) => implKind(i) === "eager" || implKind(i) === "math");
  const stages = doc.stages || [];
  if (unfused0 && fused1.length && !i1.some((i) => implKind(i) !== "fused")) {
    // The stages that ran in the first run and are gone in this one.
    const gone = stages
      .filter((s) => s.values[0] > 0 && !(s.values[index] > 0) && s.stage !== "fused")
      .filter((s) => ["qk_matmul", "scale_mask", "softmax", "dropout", "av_matmul"].includes(s.stage))
      .sort((a, b) => stageIndex(a.stage) - stageIndex(b.stage))
      .map((s) => stageLabel(s.stage))
      .filter((label, i, all) => all.indexOf(label) === i); // forward and backward rows name a stage once
    const only = (doc.kernels_only_in || {})[cur.run] || [];
    const fusedKernels = only.filter((k) => k.stage === "fused").reduce((s, k) => s + n0(k.count), 0);
    const calls = num(cur.calls);
    const perCall = calls && fusedKernels === calls ? "one fused" : "fused";
    const what = `${perCall} ${fused1.join("/")} kernel${perCall === "one fused" ? " per call" : "s"}`;
    line += gone.length ? `: ${what} replace${perCall === "one fused" ? "s" : ""} ${gone.join(", ")}` : `: ${what}`;
  } else if (i0.join("+") !== i1.join("+")) {
    line += `: implementation ${i0.join("+") || "none"} → ${i1.join("+") || "none"}`;
  } else {
    const top = [...stages].sort((a, b) => Math.abs(b.values[index] - b.values[0]) - Math.abs(a.values[index] - a.values[0]))[0];
    if (top && top.values[index] !== top.values[0]) {
      line += `; largest change: ${stageLabel(top.stage)}${top.pass === "bwd" ? " (bwd)" : ""}`;
    }
  }
  return line;
}

export function compareModel(doc: CompareDoc): CompareModel {
  const runs = doc.runs || [];
  const basis: Basis = doc.time_basis === "cpu" ? "cpu" : "gpu";
  const stages = [...(doc.stages || [])];
  const chartStages = [...stages].sort((a, b) =>
    (a.pass || "fwd") === (b.pass || "fwd") ? stageIndex(a.stage) - stageIndex(b.stage) : (a.pass || "fwd") === "fwd" ? -1 : 1);
  const label = (s: { stage: string; pass?: Pass }) => stageLabel(s.stage) + ((s.pass || "fwd") === "bwd" ? " (bwd)" : "");
  const key = basis === "gpu" ? "attention_gpu_us" : "attention_cpu_us";
  return {
    runs,
    basis,
    headlines: runs.slice(1).map((_, i) => compareHeadline(doc, i + 1)),
    backendSummary: doc.summary || "",
    chart: {
      categories: chartStages.map(label),
      series: runs.map((run, i) => ({ run, values: chartStages.map((s) => n0(s.values[i])) })),
    },
    stageRows: stages
      .map((s) => ({
        label: label(s), stage: s.stage, pass: (s.pass || "fwd") as Pass, values: s.values.map(n0),
        delta: n0(s.delta_us), pct: num(s.delta_pct),
      }))
      .sort((a, b) => Math.abs(b.delta) - Math.abs(a.delta)),
    layerRows: (doc.layers || [])
      .map((l) => ({
        layerType: l.layer_type, values: l.values.map(n0), implementations: l.implementations || runs.map(() => null),
        delta: n0(l.delta_us), pct: num(l.delta_pct),
      }))
      .sort((a, b) => Math.abs(b.delta) - Math.abs(a.delta)),
    onlyIn: runs.map((run) => {
      const ks = (doc.kernels_only_in || {})[run] || [];
      return {
        run,
        count: num((doc.kernels_only_in_counts || {})[run]) ?? ks.length,
        kernels: ks.map((k) => ({ name: String(k.name), stage: k.stage || "other", gpu_us: n0(k.gpu_us), count: num(k.count) })),
      };
    }),
    totals: (doc.totals || []).map((t) => ({
      run: t.run, us: n0(t[key]), share: num(t.attention_share), implementations: implSet(t.implementations),
      calls: num(t.calls),
    })),
  };
}

// ---- scaling --------------------------------------------------------------------------------

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

export function stageRowsTotal(rows: StageRow[] | undefined, basis: Basis): number {
  return (rows || []).reduce((s, r) => s + timeOf(r, basis), 0);
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

// The Overview view's model: the report's `overview` (tb_attn_plugin/overview/) as what the view
// draws: the step bar's parts, the limit sentence, attention's place, per-step spread, phases. Pure.

import { partColor } from "./colors";
import type { Overview, Report, StepBreakdown } from "./types";

export const PART_LABEL: Record<string, string> = {
  attention_fwd: "attention fwd", attention_bwd: "attention bwd", other_matmul: "other matmul",
  other_compute: "other compute", communication: "communication (exposed)", memcpy: "memcpy", memset: "memset",
  idle: "idle", not_recorded: "not recorded (GPU window cut)",
};

export interface BarPart { part: string; label: string; us: number; share: number; color: string }

export interface StepRow {
  label: string; span: number | null; busy: number | null; idle: number | null; attention: number | null;
  dataLoading: number; optimizer: number;
}

export interface OverviewModel {
  present: boolean;
  sentence: string;
  kind: string;
  span: number | null;
  busy: number | null;
  label: string;
  bar: BarPart[]; // parts with time, in precedence order; their shares sum to 1
  attentionUs: number;
  attentionOfBusy: number | null;
  attentionOfSpan: number | null;
  idleHost: number | null;
  idleSync: number | null;
  idleKernel: number | null; // HTA's kernel wait: idle after the next work's launch had returned
  communication: { total: number; exposed: number; hidden: number } | null;
  memcpy: { direction: string; us: number; count: number }[];
  host: { step: number | null; dataLoading: number; optimizer: number };
  steps: StepRow[];
  cut: boolean;
  phases: PhaseModel[];
}

export interface PhaseModel {
  phase: string;
  calls: number;
  us: number;
  evidence: string;
  /** the phase's roofline point over its calls with shapes; null when none had one */
  roofline: { bound: string | null; bytes: number; kvCache: boolean; atMost: boolean; intensity: number | null; tbs: number | null; calls: number } | null;
}

const attentionOf = (s: StepBreakdown): number =>
  s.parts.filter((p) => p.part.startsWith("attention_")).reduce((a, p) => a + p.us, 0);

export function overviewModel(report: Report): OverviewModel {
  const o = (report as Partial<Report>).overview as Overview | undefined;
  const t = o?.total ?? null;
  const empty: OverviewModel = {
    present: false, sentence: o?.limit.sentence ?? "this report has no step overview (made by a tb-attn before engine 14)",
    kind: o?.limit.kind ?? "unknown", span: null, busy: null, label: "", bar: [], attentionUs: 0, attentionOfBusy: null,
    attentionOfSpan: null, idleHost: null, idleSync: null, idleKernel: null, communication: null, memcpy: [],
    host: { step: null, dataLoading: 0, optimizer: 0 }, steps: [], cut: !!o?.window_cut, phases: [],
  };
  if (!o || !t) return empty;
  const span = t.gpu_span_us ?? null;
  const total = t.parts.reduce((a, p) => a + p.us, 0);
  const bar = t.parts.filter((p) => p.us > 0).map((p) => ({
    part: p.part, label: PART_LABEL[p.part] ?? p.part, us: p.us, share: total > 0 ? p.us / total : 0, color: partColor(p.part),
  }));
  const att = attentionOf(t);
  const busy = t.busy_us ?? null;
  return {
    present: true, sentence: o.limit.sentence, kind: o.limit.kind, span, busy,
    label: (t.steps ?? 1) > 1 ? `${t.steps} steps summed` : t.label, bar, attentionUs: att,
    attentionOfBusy: busy ? att / busy : null, attentionOfSpan: span ? att / span : null,
    idleHost: t.idle_host_us ?? null, idleSync: t.idle_sync_us ?? null, idleKernel: t.idle_kernel_us ?? null,
    communication: t.communication_us ? { total: t.communication_us, exposed: t.communication_exposed_us ?? 0,
      hidden: t.communication_hidden_us ?? 0 } : null,
    memcpy: t.memcpy_by_direction.map((d) => ({ direction: d.direction, us: d.us, count: d.count })),
    host: { step: t.host_us ?? null, dataLoading: t.data_loading_us, optimizer: t.optimizer_us },
    steps: o.steps.map((s) => ({
      label: s.label, span: s.gpu_span_us ?? null, busy: s.busy_us ?? null, idle: s.idle_us ?? null,
      attention: s.gpu_span_us === null ? null : attentionOf(s), dataLoading: s.data_loading_us, optimizer: s.optimizer_us,
    })),
    cut: o.window_cut,
    phases: o.phases.map((p) => ({
      phase: p.phase, calls: p.calls, us: p.gpu_us, evidence: p.evidence[0] ?? "",
      roofline: p.roofline ? { bound: p.roofline.bound ?? null, bytes: p.roofline.bytes, kvCache: p.roofline.bytes_are !== "stage_model",
        atMost: p.roofline.bytes_are === "kv_cache_read_at_most",
        intensity: p.roofline.intensity ?? null, tbs: p.roofline.achieved_tbs ?? null, calls: p.roofline.calls } : null,
    })),
  };
}

/** min / median / max of the known values (null when none). */
export function spread(values: (number | null)[]): { min: number; median: number; max: number } | null {
  const v = values.filter((x): x is number => x !== null).sort((a, b) => a - b);
  if (!v.length) return null;
  const h = Math.floor(v.length / 2);
  return { min: v[0], median: v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2, max: v[v.length - 1] };
}

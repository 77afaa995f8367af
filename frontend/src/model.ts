// Data shaping shared by the views' models (*_model.ts): stage names and order, implementation kinds and
// badges, the time basis. Pure functions, no DOM, no fetch (test/model.test.ts). Robust to missing
// optional fields: a missing number is 0 where it is summed and null where it is shown.

import { num } from "./format";
import { baseImplementation } from "./colors";
import { STAGES } from "./tags"; // the tag format's stages in order, generated from format/tags.py
import type { Report, StageRow } from "./types";
import type { Basis } from "./tags";

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

export const n0 = (v: unknown): number => num(v) ?? 0;

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

export function basisOf(report: Report): Basis {
  return report.time_basis === "cpu" ? "cpu" : "gpu";
}

export function timeOf(row: { gpu_us?: number; cpu_us?: number } | undefined, basis: Basis): number {
  if (!row) return 0;
  return n0(basis === "gpu" ? row.gpu_us : row.cpu_us);
}

export function round3(v: number): number {
  return Math.round(v * 1000) / 1000;
}

export function stageRowsTotal(rows: StageRow[] | undefined, basis: Basis): number {
  return (rows || []).reduce((s, r) => s + timeOf(r, basis), 0);
}

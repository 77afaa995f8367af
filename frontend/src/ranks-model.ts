// The Ranks view's model: /ranks JSON (tb_attn_plugin/ranks/summary.py) shaped for the heatmap of
// ranks x stages, the slowest-rank headline, ranks on another implementation, per-layer spread.
// Pure functions, no DOM: tested in test/ranks_model.test.ts.

import { num } from "./format";
import { stageColor } from "./colors";
import { stageLabel } from "./model";
import type { RankRow, RanksDoc } from "./route_types";
import type { Basis } from "./tags";

export interface HeatCell {
  stage: string;
  us: number;
  /** 0..1: this rank's time in the stage over the largest rank's time in that stage. */
  intensity: number;
  color: string;
}

export interface RanksModel {
  basis: Basis;
  headline: string;
  stages: { stage: string; label: string; color: string }[];
  rows: (RankRow & { cells: HeatCell[]; slowest: boolean; odd: string[] })[];
  imbalance: number | null;
  medianUs: number;
  worldSize: number | null;
  missing: number[];
  missingCount: number;
  odd: string[];
  /** Traces not in the table: their rank was taken by another, or they carry none. */
  leftOut: string[];
  layers: NonNullable<RanksDoc["layers"]>;
  errors: string[];
  /** Default rank-against-rank pair: the rank nearest the median, then the slowest. */
  pair: [string, string] | null;
}

const MAX_LAYERS_SHOWN = 12;
const MAX_LEFT_OUT_NAMED = 5;

function leftOut(doc: RanksDoc): string[] {
  const out: string[] = [];
  const dups = doc.duplicate_ranks || [];
  const nDup = num(doc.duplicate_count) ?? dups.length;
  if (nDup > 0) {
    const shown = dups.slice(0, MAX_LEFT_OUT_NAMED).map((d) => `${d.worker} (rank ${d.rank}, kept ${d.kept})`).join(", ");
    const local = dups.some((d) => d.rank_from === "worker name") ? "; worker names may carry a node's local rank" : "";
    out.push(`left out, their rank taken by another trace (${nDup}): ${shown}${nDup > MAX_LEFT_OUT_NAMED ? " …" : ""}${local}`);
  }
  const names = doc.unranked_workers || [];
  const nUnranked = num(doc.unranked_count) ?? names.length;
  if (nUnranked > 0) {
    out.push(`without a rank, left out (${nUnranked}): ${names.slice(0, MAX_LEFT_OUT_NAMED).join(", ")}${nUnranked > MAX_LEFT_OUT_NAMED ? " …" : ""}`);
  }
  return out;
}

/** A cell colour: white to the stage's own colour, by intensity (so columns stay recognisable). */
export function heatColor(base: string, intensity: number): string {
  const m = /^#([0-9a-f]{6})$/i.exec(base);
  const t = Math.max(0, Math.min(1, Number.isFinite(intensity) ? intensity : 0));
  if (!m) return `rgba(153,153,153,${t.toFixed(3)})`;
  const v = parseInt(m[1], 16);
  const mix = (c: number) => Math.round(255 + (c - 255) * t);
  return `rgb(${mix((v >> 16) & 255)},${mix((v >> 8) & 255)},${mix(v & 255)})`;
}

export function ranksModel(doc: RanksDoc): RanksModel {
  const stages = (doc.stages || []).map((s) => ({ stage: s, label: stageLabel(s), color: stageColor(s) }));
  const ranks = [...(doc.ranks || [])].sort((a, b) => a.rank - b.rank);
  const maxOf: Record<string, number> = {};
  for (const s of stages) maxOf[s.stage] = Math.max(0, ...ranks.map((r) => num(r.stages?.[s.stage]) ?? 0));
  const oddBy = new Map<number, string[]>();
  for (const o of doc.odd_ranks || []) {
    oddBy.set(o.rank, [...(oddBy.get(o.rank) || []), `${o.what} ${o.value} (others: ${o.usual})`]);
  }
  const rows = ranks.map((r) => ({
    ...r,
    slowest: doc.slowest?.rank === r.rank,
    odd: oddBy.get(r.rank) || [],
    cells: stages.map((s) => {
      const us = num(r.stages?.[s.stage]) ?? 0;
      const intensity = maxOf[s.stage] > 0 ? us / maxOf[s.stage] : 0;
      return { stage: s.stage, us, intensity, color: heatColor(s.color, intensity) };
    }),
  }));
  const median = num(doc.median_us) ?? 0;
  let pair: [string, string] | null = null;
  if (ranks.length >= 2 && doc.slowest) {
    const others = ranks.filter((r) => r.rank !== doc.slowest!.rank);
    const mid = others.reduce((best, r) => (Math.abs(r.attention_us - median) < Math.abs(best.attention_us - median) ? r : best));
    pair = [mid.worker, doc.slowest.worker];
  }
  return {
    basis: doc.time_basis === "cpu" ? "cpu" : "gpu",
    headline: doc.headline || "",
    stages,
    rows,
    imbalance: num(doc.imbalance),
    medianUs: median,
    worldSize: num(doc.world_size),
    missing: doc.missing_ranks || [],
    missingCount: num(doc.missing_count) ?? 0,
    odd: (doc.odd_ranks || []).map((o) => `rank ${o.rank} runs ${o.what} ${o.value} where the others run ${o.usual}`),
    leftOut: leftOut(doc),
    layers: (doc.layers || []).filter((l) => (num(l.spread) ?? 0) > 0).slice(0, MAX_LAYERS_SHOWN),
    errors: doc.errors || [],
    pair,
  };
}

/** The reason a /ranks answer is no rank summary (the run is not a job of several ranks), or null. */
export function notAJob(doc: RanksDoc): string | null {
  return typeof doc.not_a_job === "string" && doc.not_a_job ? doc.not_a_job : null;
}

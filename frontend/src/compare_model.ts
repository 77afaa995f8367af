// The Compare view's model: a /compare answer (CompareDoc) as headlines, a chart and rows. Pure functions, no
// DOM, no fetch (tested in test/model.test.ts).

import { implKind, n0, stageIndex, stageLabel } from "./model";
import { num } from "./format";
import type { CompareDoc } from "./route_types";
import type { Basis, Pass } from "./tags";

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

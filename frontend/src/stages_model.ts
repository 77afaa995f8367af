// The Stages view's model: each layer's time by stage, and one layer's detail. Pure functions, no DOM, no fetch
// (tested in test/model.test.ts).

import { n0, round3, stageIndex, stageLabel, timeOf } from "./model";
import { stageColor } from "./colors";
import type { Layer, Report } from "./types";
import type { Basis, Pass } from "./tags";

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

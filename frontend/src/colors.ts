// One colour map for the whole tab: every view takes its colours from here, so a stage, an
// implementation (a sweep's backend is one), a run, a roofline bound or a roof has one colour on
// every chart, legend and table of a page, and the same colour on every page (test/colors.test.ts).

/** Colour-blind-friendly (Tableau 10 and 20), one fixed colour per stage in every view. */
export const STAGE_COLOR: Record<string, string> = {
  qkv_proj: "#9c9ede",
  qk_matmul: "#4e79a7",
  scale_mask: "#76b7b2",
  softmax: "#e15759",
  dropout: "#edc948",
  av_matmul: "#59a14f",
  out_proj: "#b07aa1",
  fused: "#f28e2b",
  quantize: "#ff9da7",
  kv_cache_write: "#9d7660",
  preprocess: "#d4a6c8",
  split_kv_reduce: "#ffbe7d",
  postprocess: "#86bcb6",
  other: "#bab0ac",
  call: "#e0e0e0",
};
export const UNKNOWN_STAGE_COLOR = "#999999";

/** One colour per part of a step (the Overview's bar): attention in the fused stage's orange, the
 *  rest in colours no stage uses, idle pale. */
export const PART_COLOR: Record<string, string> = {
  attention_fwd: "#f28e2b", attention_bwd: "#b6651b", other_matmul: "#4e79a7", other_compute: "#a0cbe8",
  communication: "#8cd17d", memcpy: "#b6992d", memset: "#f1ce63", idle: "#eeeeee", not_recorded: "#d7b5a6",
};

export function partColor(part: string): string {
  return PART_COLOR[part] ?? UNKNOWN_STAGE_COLOR;
}

export function stageColor(stage: string | undefined): string {
  return (stage && STAGE_COLOR[stage]) || UNKNOWN_STAGE_COLOR;
}

/** One colour per implementation name (the badge's family shade is for its kind; charts tell
 * implementations apart, so two fused ones get two colours, each always the same). */
export const IMPL_COLORS: Record<string, string> = {
  eager: "#f28e2b", mha_fastpath: "#ff9da7", math: "#e15759", flash: "#59a14f", efficient: "#76b7b2",
  cudnn: "#8cd17d", cpu_fused: "#499894", flash_cpu: "#499894", aotriton: "#86bcb6", ck: "#b6992d", flex: "#edc948",
  compiled: "#4e79a7", sdpa: "#b07aa1", fused: "#59a14f", unknown: "#9c755f",
};
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#ff9da7", "#bab0ac"];

/** The implementation a series' name stands for: "cpu_fused compiled" (model.seriesKeyOf) is cpu_fused, compiled. */
export function baseImplementation(impl: string | null | undefined): { impl: string; compiled: boolean } {
  const name = (impl || "unknown").trim() || "unknown";
  const m = / compiled$/.exec(name);
  return m && name !== "compiled" ? { impl: name.slice(0, m.index), compiled: true } : { impl: name, compiled: false };
}

/** The colour of an implementation, its compiled variant included (told apart by implLine). */
export function implColor(impl: string | null | undefined): string {
  const name = baseImplementation(impl).impl;
  if (IMPL_COLORS[name]) return IMPL_COLORS[name];
  let hash = 0;
  for (const ch of name) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return PALETTE[hash % PALETTE.length];
}

/** How a series of this implementation is stroked: dashed when compiled, on every chart. */
export function implLine(impl: string | null | undefined): "solid" | "dashed" {
  return baseImplementation(impl).compiled ? "dashed" : "solid";
}

/** Colours of a chart's series names that may be implementations (a sweep's backends) or not (a
 * module a sweep timed): implementations keep implColor; the others take palette colours that no
 * implementation on the chart uses, by sorted name, so a name's colour never depends on its order. */
export function seriesColors(names: string[]): Map<string, string> {
  const out = new Map<string, string>();
  const others: string[] = [];
  for (const n of new Set(names)) {
    if (IMPL_COLORS[baseImplementation(n).impl]) out.set(n, implColor(n));
    else others.push(n);
  }
  const used = new Set(out.values());
  const free = PALETTE.filter((c) => !used.has(c));
  others.sort().forEach((n, i) => out.set(n, (free.length ? free : PALETTE)[i % (free.length || PALETTE.length)]));
  return out;
}

/** Runs of one page (Compare), by their place in the page's run list: the same run, the same colour
 * on its totals row, the stages chart and the memory overlay, whichever runs lack a chart's data. */
export const RUN_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"];

export function runColors(runs: string[]): Map<string, string> {
  const out = new Map<string, string>();
  runs.forEach((r, i) => { if (!out.has(r)) out.set(r, RUN_COLORS[i % RUN_COLORS.length]); });
  return out;
}

/** Roofline points by what bounds them; the roofs (one per precision or device) in greys and browns. */
export const BOUND_COLOR: Record<string, string> = { memory: "#e15759", compute: "#4e79a7", launch: "#f28e2b", none: "#9c755f" };
export const ROOF_COLORS = ["#37474f", "#8d6e63", "#5c6bc0", "#26a69a"];

/** Marker shapes for a page's model · device groups (Scaling): colour says the implementation,
 * the stroke whether it was compiled, the marker which model on which device. */
export const SYMBOLS = ["circle", "triangle", "rect", "diamond", "roundRect", "pin"];

export interface SeriesStyle { color: string; line: "solid" | "dashed"; symbol: string }

/** The style of a series of ``implementation`` in ``group`` among a page's ``groups``: the same on
 * every chart of the page, whichever series a chart leaves out. */
export function seriesStyle(implementation: string, group: string, groups: string[]): SeriesStyle {
  const sorted = [...new Set(groups)].sort();
  const i = Math.max(0, sorted.indexOf(group));
  return { color: implColor(implementation), line: implLine(implementation), symbol: SYMBOLS[i % SYMBOLS.length] };
}

/** The Memory view's curves: bytes allocated, bytes reserved, and the peak's pin (a red darker than
 * softmax's, whose stage bands shade the same chart). */
export const MEMORY_COLOR = { allocated: "#333333", reserved: "#999999", peak: "#8b0000" };

// The view's state in the URL. TensorBoard keeps its own state in the page's hash as
// "#<plugin>&key=value&..." (tf_storage); ours rides along as attn_* keys, so a copied TensorBoard
// link opens the same view. Pure functions here; index.ts reads and writes the actual URL.

import type { Basis, Pass } from "./tags";

export const VIEWS = ["overview", "summary", "stages", "kernels", "compare", "scaling", "timeline", "roofline", "memory", "ranks", "sweep"] as const;
export type View = (typeof VIEWS)[number];

export interface State {
  view: View;
  run: string | null;
  worker: string | null;
  span: string | null;
  compare: string[];
  layer: string | null;
  call: number | null;
  pass: Pass;
  basis: Basis | null;
  stage: string | null;
  filter: string;
  sweep: string | null; // the sweep run the Sweep view shows
}

export const DEFAULT_STATE: State = {
  view: "overview", run: null, worker: null, span: null, compare: [], layer: null, call: null,
  pass: "fwd", basis: null, stage: null, filter: "", sweep: null,
};

export interface Hash {
  tab: string;
  params: [string, string][];
}

/** "#tb_attn&a=1&b=x%20y" -> {tab: "tb_attn", params: [["a","1"],["b","x y"]]}, as tf_storage reads it. */
export function parseHash(hash: string): Hash {
  const body = hash.startsWith("#") ? hash.slice(1) : hash;
  let tab = "";
  const params: [string, string][] = [];
  if (!body) return { tab, params };
  for (const part of body.split("&")) {
    if (!part) continue;
    const eq = part.split("=");
    try {
      if (eq.length === 1) tab = decodeURIComponent(eq[0]);
      else if (eq.length === 2) params.push([decodeURIComponent(eq[0]), decodeURIComponent(eq[1])]);
    } catch {
      // a malformed escape: ignore that part, as TensorBoard does not crash on it either
    }
  }
  return { tab, params };
}

export function formatHash(h: Hash): string {
  const parts: string[] = [];
  if (h.tab) parts.push(encodeURIComponent(h.tab));
  for (const [k, v] of h.params) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  return parts.length ? "#" + parts.join("&") : "";
}

const PREFIX = "attn_";

/** A list of names as one value: each name escaped, joined by commas (names may hold commas). */
export function encodeList(names: string[]): string {
  return names.map((n) => encodeURIComponent(n)).join(",");
}

export function decodeList(value: string): string[] {
  if (!value) return [];
  return value.split(",").map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  }).filter((p) => p.length > 0);
}

export function stateFromParams(params: [string, string][]): State {
  const m = new Map(params.filter(([k]) => k.startsWith(PREFIX)).map(([k, v]) => [k.slice(PREFIX.length), v]));
  const s: State = { ...DEFAULT_STATE, compare: [] };
  const view = m.get("view");
  if (view && (VIEWS as readonly string[]).includes(view)) s.view = view as View;
  s.run = m.get("run") || null;
  s.worker = m.get("worker") || null;
  s.span = m.has("span") ? (m.get("span") as string) : null;
  s.compare = decodeList(m.get("compare") || "");
  s.layer = m.get("layer") || null;
  const rawCall = m.get("call") || "";
  s.call = /^\d{1,9}$/.test(rawCall) ? Number(rawCall) : null;
  s.pass = m.get("pass") === "bwd" ? "bwd" : "fwd";
  const basis = m.get("basis");
  s.basis = basis === "gpu" || basis === "cpu" ? basis : null;
  s.stage = m.get("stage") || null;
  s.filter = m.get("filter") || "";
  s.sweep = m.get("sweep") || null;
  return s;
}

/** Our keys for a state; defaults are left out so that links stay short. */
export function stateToParams(s: State): [string, string][] {
  const out: [string, string][] = [];
  if (s.view !== DEFAULT_STATE.view) out.push([PREFIX + "view", s.view]);
  if (s.run) out.push([PREFIX + "run", s.run]);
  if (s.worker) out.push([PREFIX + "worker", s.worker]);
  if (s.span !== null) out.push([PREFIX + "span", s.span]);
  if (s.compare.length) out.push([PREFIX + "compare", encodeList(s.compare)]);
  if (s.layer) out.push([PREFIX + "layer", s.layer]);
  if (s.call !== null) out.push([PREFIX + "call", String(s.call)]);
  if (s.pass !== "fwd") out.push([PREFIX + "pass", s.pass]);
  if (s.basis) out.push([PREFIX + "basis", s.basis]);
  if (s.stage) out.push([PREFIX + "stage", s.stage]);
  if (s.filter) out.push([PREFIX + "filter", s.filter]);
  if (s.sweep) out.push([PREFIX + "sweep", s.sweep]);
  return out;
}

/** The page's hash with our keys replaced and everything else (TensorBoard's tab and keys) kept. */
export function mergeHash(current: string, s: State, tab: string): string {
  const h = parseHash(current);
  const kept = h.params.filter(([k]) => !k.startsWith(PREFIX));
  return formatHash({ tab: h.tab || tab, params: [...kept, ...stateToParams(s)] });
}

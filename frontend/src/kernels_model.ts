// The Kernels view's model: the report's kernels grouped by stage, sortable. Pure functions, no DOM, no fetch
// (tested in test/model.test.ts).

import { n0, round3, stageIndex, stageLabel } from "./model";
import { stageColor } from "./colors";
import type { Kernel } from "./types";
import type { Pass } from "./tags";

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

// Number formatting shared by every view. Pure: unit-tested in test/format.test.ts.

import type { KernelOccupancy } from "./types";

const MINUS = "\u2212";

export function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Microseconds as µs, ms or s with a precision a person can read. */
export function fmtUs(us: unknown): string {
  const v = num(us);
  if (v === null) return "—";
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)} s`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(2)} ms`;
  return `${v.toFixed(1)} µs`;
}

/**
 * A time axis's tick formatter: every tick in the unit of the axis's largest value, zero included
 * ("0 ms" beside "2.5 ms", never "0.0 µs" under ms ticks). From 80% of a unit up the axis uses it,
 * as the chart rounds its top up to a nice number ("1 ms", not "1000 µs").
 */
export function usAxis(maxUs: unknown): (v: number) => string {
  const a = Math.abs(num(maxUs) ?? 0);
  const [scale, unit] = a >= 8e5 ? [1e6, "s"] : a >= 800 ? [1e3, "ms"] : [1, "µs"];
  return (v: number) => `${Number((v / scale).toPrecision(3))} ${unit}`;
}

/** A share in [0, 1] as a percentage with one decimal. */
export function fmtShare(share: unknown): string {
  const v = num(share);
  return v === null ? "—" : `${(v * 100).toFixed(1)}%`;
}

/** A signed percentage change, with a real minus sign. */
export function fmtDeltaPct(pct: unknown): string {
  const v = num(pct);
  if (v === null) return "new";
  const r = Math.round(v);
  if (r === 0) return v === 0 ? "0%" : `${v > 0 ? "+" : MINUS}${Math.abs(v).toFixed(1)}%`;
  return `${r > 0 ? "+" : MINUS}${Math.abs(r)}%`;
}

export function fmtDeltaUs(us: unknown): string {
  const v = num(us);
  if (v === null) return "—";
  if (v === 0) return fmtUs(0);
  return (v > 0 ? "+" : MINUS) + fmtUs(Math.abs(v));
}

export function fmtBytes(b: unknown): string {
  let v = num(b);
  if (v === null) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v.toFixed(0)} B` : `${v.toFixed(1)} ${units[i]}`;
}

export function fmtCount(n: unknown): string {
  const v = num(n);
  if (v === null) return "—";
  return Math.round(v).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

const sig3 = (v: number): string => (Math.abs(v) >= 1000 ? v.toFixed(0) : Number(v.toPrecision(3)).toString());

/** A FLOP rate given in TFLOP/s, in the unit that keeps its digits (the Python twin is
 * tb_attn_plugin/format/units.py: flops_rate_text): 1.23 TFLOP/s, 21.7 GFLOP/s, 512 MFLOP/s; never 0.0 TFLOP/s. */
export function fmtTflops(t: unknown): string {
  const v = num(t);
  if (v === null) return "—";
  for (const [scale, unit] of [[1, "TFLOP/s"], [1e-3, "GFLOP/s"], [1e-6, "MFLOP/s"]] as [number, string][]) {
    if (Math.abs(v) >= scale) return `${sig3(v / scale)} ${unit}`;
  }
  return v === 0 ? "0 FLOP/s" : `${sig3(v / 1e-9)} kFLOP/s`;
}

/** A bandwidth given in TB/s (10^12 B/s): TB/s from 1 TB/s, else GB/s or MB/s (units.py: bandwidth_text). */
export function fmtTbs(t: unknown): string {
  const v = num(t);
  if (v === null) return "—";
  if (Math.abs(v) >= 1) return `${sig3(v)} TB/s`;
  if (Math.abs(v) >= 1e-3) return `${sig3(v * 1e3)} GB/s`;
  return `${sig3(v * 1e6)} MB/s`;
}

/** Compare names with their numbers as numbers: layers._2 before layers._10. */
export function naturalCompare(a: string, b: string): number {
  return a.localeCompare(b, "en", { numeric: true });
}

/** A tick step for a byte axis up to ``max`` bytes: a power-of-two multiple (1, 2, 4 or 8 of KiB, MiB, ...)
 * giving at most ``ticks`` intervals, so the ticks read 4 / 8 / 12 MiB, not 4.8 / 9.5 / 14.3 MiB. */
export function niceByteStep(max: number, ticks = 5): number | undefined {
  if (!(max > 0) || !Number.isFinite(max)) return undefined;
  let step = 1;
  while (max / step > ticks) step *= 2;
  return step;
}

/**
 * A readable short form of a C++ kernel name: the function name without return type, namespaces,
 * template arguments and parameters. The full name stays available in the views.
 */
export function shortKernelName(name: string): string {
  let s = name.trim().replace(/^void\s+/, "");
  // Drop the parameter list and template arguments, balancing brackets.
  let out = "";
  let depth = 0;
  for (const ch of s) {
    if (ch === "<" || ch === "(") {
      // "(anonymous namespace)" is part of a qualified name, not a parameter list.
      depth++;
      continue;
    }
    if (ch === ">" || ch === ")") {
      depth = Math.max(0, depth - 1);
      continue;
    }
    if (depth === 0) out += ch;
  }
  s = out.replace(/\s+/g, " ").trim();
  const parts = s.split("::").filter((p) => p.length > 0);
  const last = parts.length ? parts[parts.length - 1] : s;
  let short = last.trim();
  if (/^(kernel\d*|device_kernel|Kernel\d*)$/.test(short)) {
    // cutlass::Kernel2<cutlass_75_tensorop_..._align1>: the template argument names the kernel.
    const inner = firstTemplateArg(name);
    if (inner && inner !== name) short = shortKernelName(inner);
  }
  return short.length ? (short.length > 80 ? short.slice(0, 79) + "…" : short) : name.slice(0, 80);
}

function firstTemplateArg(name: string): string | null {
  const open = name.indexOf("<");
  if (open < 0) return null;
  let depth = 0;
  for (let i = open; i < name.length; i++) {
    const ch = name[i];
    if (ch === "<") depth++;
    else if (ch === ">") {
      depth--;
      if (depth === 0) return name.slice(open + 1, i).trim();
    } else if (ch === "," && depth === 1) return name.slice(open + 1, i).trim();
  }
  return null;
}

/**
 * A span as tensorboard_trace_handler names it (the time the trace was written, in ns since the
 * epoch: 19 digits) as a readable UTC time; other spans (a file name, a short number) as they are.
 */
export function fmtSpan(span: string | null | undefined): string {
  const s = span ?? "";
  if (!/^\d{10,19}$/.test(s)) return s;
  const ms = Number(s.length >= 19 ? s.slice(0, -6) : s.length >= 16 ? s.slice(0, -3) : s.length >= 13 ? s : s + "000");
  const d = new Date(ms);
  if (!Number.isFinite(d.getTime()) || d.getUTCFullYear() < 2000 || d.getUTCFullYear() > 2200) return s;
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

/**
 * Short names that tell different kernels apart: where two full names shorten to the same text,
 * each gets its first template argument ("elementwise_kernel<FillFunctor>"), then a number.
 */
export function distinctShortNames(names: string[]): Map<string, string> {
  const full = [...new Set(names)];
  const out = new Map(full.map((n) => [n, shortKernelName(n)]));
  const clash = (m: Map<string, string>) => {
    const seen = new Map<string, number>();
    for (const v of m.values()) seen.set(v, (seen.get(v) || 0) + 1);
    return (v: string) => (seen.get(v) || 0) > 1;
  };
  let dup = clash(out);
  for (const n of full) {
    const s = out.get(n)!;
    if (!dup(s)) continue;
    const arg = templateHint(n);
    if (arg) out.set(n, `${s}<${arg}>`);
  }
  dup = clash(out);
  const counter = new Map<string, number>();
  for (const n of full) {
    const s = out.get(n)!;
    if (!dup(s)) continue;
    const k = (counter.get(s) || 0) + 1;
    counter.set(s, k);
    out.set(n, `${s} #${k}`);
  }
  return out;
}

/** The most telling template argument of a kernel name, shortened: a functor or type name. */
function templateHint(name: string): string | null {
  const open = name.indexOf("<");
  if (open < 0) return null;
  const args: string[] = [];
  let depth = 0;
  let cur = "";
  for (let i = open; i < name.length; i++) {
    const ch = name[i];
    if (ch === "<") { depth++; if (depth === 1) continue; }
    if (ch === ">") { depth--; if (depth === 0) { args.push(cur); break; } }
    if (ch === "," && depth === 1) { args.push(cur); cur = ""; continue; }
    cur += ch;
  }
  // Skip plain numbers (vector widths, block sizes): the first named argument tells more.
  const named = args.map((a) => a.trim()).find((a) => /[A-Za-z_]/.test(a)) || args[0]?.trim();
  if (!named) return null;
  const bare = shortKernelName(named);
  return bare.length > 40 ? bare.slice(0, 39) + "…" : bare;
}

/** Why the trace's est. achieved occupancy % reads 0, short (reading/occupancy.py zero_estimate_cause). */
export const ZERO_ESTIMATE: Record<NonNullable<KernelOccupancy["zero_estimate_cause"]>, string> = {
  "shared memory over the default limit": "over the 48 KiB it assumes",
  "idle SMs": "idle SMs",
  mixed: "over 48 KiB or idle SMs",
  unexplained: "unexplained",
};

/** "occupancy 12.5% (registers) · kineto est. 1%": theoretical, the limit that binds, the estimate or its gap. */
export function occupancyText(o: KernelOccupancy): string {
  const theo = o.theoretical_pct == null ? "occupancy unknown" : `occupancy ${o.theoretical_pct}% (${(o.limited_by || []).join(", ")})`;
  const ach = o.achieved_pct != null ? ` · kineto est. ${o.achieved_pct}%`
    : o.zero_estimate_cause ? ` · kineto est. 0%: ${ZERO_ESTIMATE[o.zero_estimate_cause]}` : "";
  const design = (o.reading || "").includes("low by design") ? " · low by design" : "";
  return theo + ach + design;
}

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

export function fmtTflops(t: unknown): string {
  const v = num(t);
  return v === null ? "—" : `${v.toFixed(1)} TFLOP/s`;
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

/** "occupancy 12.5% (registers) · CUPTI 1%": theoretical, the limit that binds, the estimate or its gap. */
export function occupancyText(o: KernelOccupancy): string {
  const theo = o.theoretical_pct == null ? "occupancy unknown" : `occupancy ${o.theoretical_pct}% (${(o.limited_by || []).join(", ")})`;
  const ach = o.achieved_pct != null ? ` · CUPTI ${o.achieved_pct}%`
    : (o.reading || "").includes("measurement gap") ? " · CUPTI 0%: not measured" : "";
  const design = (o.reading || "").includes("low by design") ? " · low by design" : "";
  return theo + ach + design;
}

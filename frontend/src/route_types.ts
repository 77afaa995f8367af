// The plugin's route answers that are not the report itself (/runs, /compare, /memory, /call); written by
// hand. The report's own types are generated into types.ts and memory_types.ts (tb_attn_plugin/format/).

import type { Basis, CallSample, Expected, Fingerprint, HostCost, KernelOccupancy, Pass, PhaseReading, WhyNotFlash } from "./types";
import type { MemorySection } from "./memory_types";

export interface SpanInfo {
  span: string;
  status: "loading" | "ready" | "error";
  message?: string;
  phase?: string;
  size_bytes?: number;
  /** The file, relative to the logdir. */
  file?: string;
  /** How a file named without {worker}.{span} was named: from its head (rank, host and pid, start time) or its name, and why. */
  named?: string;
  summary?: {
    kind?: "trace" | "memory_snapshot";
    metadata?: Record<string, unknown>;
    time_basis?: Basis;
    calls?: number;
    attention_share?: number;
    attention_gpu_us?: number;
    attention_cpu_us?: number;
    implementations?: string[];
    device?: string | null;
    empty?: boolean; // no step took time and no attention call: never the default span
  };
}

export interface RunInfo {
  run: string;
  status?: "loading" | "ready" | "error";
  workers: { worker: string; spans: SpanInfo[]; default_span?: string }[];
  metadata?: Record<string, unknown>;
}

export interface RunsDoc {
  runs: RunInfo[];
  scanned?: boolean;
  error?: string;
  /** Files that look like traces but are not listed, and why (at most 200; skipped_count counts all). */
  skipped?: { file: string; reason: string }[];
  skipped_count?: number;
}

export interface CompareDoc {
  runs: string[];
  time_basis?: Basis;
  time_basis_note?: string;
  summary?: string;
  stages?: { stage: string; pass?: Pass; values: number[]; delta_us: number; delta_pct: number | null }[];
  layers?: {
    layer_type: string;
    values: number[];
    implementations?: (string | null)[];
    delta_us: number;
    delta_pct: number | null;
  }[];
  kernels_only_in?: Record<string, { name: string; stage?: string; pass?: Pass; gpu_us?: number; count?: number }[]>;
  kernels_only_in_counts?: Record<string, number>;
  /** What differs besides the change compared (devices, models), said before any percentage. */
  differences?: string[];
  /** Last run against the first: beyond the runs' step-to-step spread or not (report/noise.py). */
  noise?: { verdict: "beyond_noise" | "within_noise" | "cannot_tell"; headline: string; why: string; p_value: number | null };
  totals?: {
    run: string;
    attention_gpu_us?: number;
    attention_cpu_us?: number;
    attention_share?: number | null;
    time_basis?: Basis;
    implementations?: { layer_type?: string; implementation?: string; calls?: number }[];
    calls?: number;
  }[];
  /** the step's span, busy, parts and idle per run (tb_attn_plugin/overview/compare.py); null for older reports */
  steps?: {
    rows: { figure: string; values: (number | null)[]; delta_us: number | null; delta_pct: number | null }[];
    limits: Record<string, string | null>;
  } | null;
}

export interface MemoryDoc {
  run: string;
  worker?: string;
  span?: string;
  metadata?: Record<string, unknown>;
  memory: MemorySection | null;
  note?: string;
}

// ---- /call: one call's sample and the Reading panel of its layer type × implementation ------------------
// Built by tb_attn_plugin/reading/call.py from pieces of the report (issue 25 item 7).

/** One kernel of the call: launches and µs in this call, its fingerprint and occupancy, or why not. */
export interface CallReadingKernel {
  name: string;
  stage: string | null;
  pass: Pass | null;
  launches: number;
  us: number;
  fingerprint: Fingerprint | null;
  fingerprint_unknown: string | null;
  occupancy: KernelOccupancy | null;
  occupancy_unknown: string | null;
}

/** What the Reading panel shows; each piece the engine cannot tell is null with its reason in unknown
 *  (keys: layer, expected, host, gpu, kernels, why_not_flash, backward). */
export interface CallReading {
  call: number | null;
  layer: string | null;
  layer_type: string | null;
  implementation: string | null;
  calls: number | null;
  /** the call's serving phase, and its layer type's reading over that phase's calls (null where the
   *  report did not split the reading by phase: fewer than two phases among the calls) */
  phase?: string | null;
  phase_reading?: PhaseReading | null;
  /** the layer type's reading over every phase it has, prefill first (null where not split) */
  phases?: PhaseReading[] | null;
  expected: Expected | null;
  host: HostCost | null;
  kernels: CallReadingKernel[];
  kernels_omitted: number;
  device_arch: string | null;
  occupancy_note: string | null;
  why_not_flash: WhyNotFlash | null;
  unknown: Record<string, string>;
}

/** GET /call: the report's sample of the call, with the Reading panel (engine 13 on). */
export interface CallAnswer extends CallSample {
  reading?: CallReading;
}

// The backend's JSON, as the frontend reads it. Every field the engine may omit is optional: the
// model layer (model.ts) turns missing values into explicit nulls or empty lists, never NaN.

export type Pass = "fwd" | "bwd";
export type Basis = "gpu" | "cpu";

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

export interface StageRow {
  stage: string;
  pass?: Pass;
  gpu_us?: number;
  cpu_us?: number;
  kernels?: number;
  launches?: number;
}

export interface Shape {
  batch?: number | null;
  q_heads?: number | null;
  kv_heads?: number | null;
  q_len?: number | null;
  k_len?: number | null;
  head_dim?: number | null;
  batch_heads?: number | null;
}

export interface Layer {
  layer: string;
  layer_type?: string;
  calls?: number;
  implementation?: string;
  backend?: string;
  compiled?: boolean;
  gpu_us?: number;
  cpu_us?: number;
  stages?: StageRow[];
  /** The layer's kernels over all its calls (engines before this field: absent). */
  kernels?: Kernel[];
  shape?: Shape | null;
  dtype?: string | null;
  causal?: boolean | null;
  flops?: number | null;
  tflops?: number | null;
  score_bytes?: number | null;
  memory_bytes?: number | null;
  /** Theoretical occupancy beside CUPTI's estimate, per kernel (engine 12 on; docs/api.md). */
  occupancy?: KernelOccupancy[];
}

export interface KernelOccupancy {
  name: string;
  theoretical_pct?: number | null;
  achieved_pct?: number | null;
  limited_by?: string[];
  reading?: string;
}

export interface Kernel {
  name: string;
  stage?: string;
  pass?: Pass;
  count?: number;
  gpu_us?: number;
  implementation?: string;
  /** The name decoded: library · pass · dtype · math unit · tile · layout · arch (engine 12 on). */
  fingerprint?: string;
}

export interface Op {
  name: string;
  stage?: string;
  pass?: Pass;
  count?: number;
  cpu_us?: number;
}

export interface CallEvent {
  name: string;
  kind?: "op" | "kernel" | string;
  stage?: string;
  pass?: Pass;
  start_us?: number;
  dur_us?: number;
  depth?: number;
  thread?: string; // CPU ops: the thread that ran it
  stream?: string; // kernels: the GPU stream
}

export interface CallSample {
  id: number;
  layer?: string;
  step?: number;
  implementation?: string;
  start_us?: number;
  dur_us?: number;
  truncated?: boolean;
  events?: CallEvent[];
}

export interface Verdict {
  id: string;
  severity?: "warn" | "info" | "error" | string;
  message: string;
}

export interface Device {
  name?: string;
  vendor?: string;
  compute_capability?: string;
  memory_bytes?: number;
  sm_count?: number;
  peak_tflops?: number | null;
}

export interface Report {
  schema_version?: number;
  source?: { file?: string; worker?: string; span?: string; size_bytes?: number };
  device?: Device | null;
  metadata?: Record<string, unknown>;
  time_basis?: Basis;
  total_gpu_us?: number;
  total_cpu_us?: number;
  attention_gpu_us?: number;
  attention_cpu_us?: number;
  attention_share?: number;
  calls?: number;
  steps?: { step: number; gpu_us?: number; cpu_us?: number; attention_gpu_us?: number; attention_cpu_us?: number; calls?: number }[];
  stages?: StageRow[];
  layers?: Layer[];
  implementations?: { layer_type?: string; implementation?: string; calls?: number }[];
  kernels?: Kernel[];
  ops?: Op[];
  call_samples?: CallSample[];
  verdicts?: Verdict[];
  warnings?: unknown[];
  trace?: { events?: number; kernels?: number; ops?: number };
  unknown_kernels?: UnknownKernel[];
}

/** A kernel named like attention that no family and no call explains (attention/safety.py). */
export interface UnknownKernel {
  name?: string;
  count?: number;
  gpu_us?: number;
  share?: number;
  toml?: string;
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
  totals?: {
    run: string;
    attention_gpu_us?: number;
    attention_cpu_us?: number;
    attention_share?: number | null;
    time_basis?: Basis;
    implementations?: { layer_type?: string; implementation?: string; calls?: number }[];
    calls?: number;
  }[];
}

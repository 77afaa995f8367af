// The report's memory section and the /memory route's answer (schema: tb_attn_plugin/report/schema.json $defs/memory).

export interface MemoryLive {
  layer: string | null;
  stage: string | null;
  pass: "fwd" | "bwd" | null;
  score_matrix: boolean;
  bytes: number;
  blocks: number;
  largest_block: number;
  frame: string | null;
  stack?: string[] | null; // snapshots: the frames the rules name, C++ ones included, innermost first
}

export interface MemoryPeak {
  bytes: number;
  t_us: number;
  layer: string | null;
  stage: string | null;
  pass: "fwd" | "bwd" | null;
  attention_bytes: number | null; // null: attention unknown (see MemorySection.attribution)
  attention_share: number | null;
  score_matrix_bytes: number;
  before_record_bytes: number;
  reserved_bytes: number | null;
  reserved_minus_allocated: number | null;
  live: MemoryLive[];
  explanation: string;
}

export interface MemoryLayer {
  layer: string;
  calls: number;
  bytes_allocated: number;
  allocs: number;
  peak_growth_bytes: number;
  score_bytes: number | null;
  score_matrix_bytes_per_call: number;
  score_matrix_blocks: number;
  stages?: { stage: string; pass: "fwd" | "bwd"; bytes_allocated: number; allocs: number; score_matrix_blocks: number }[];
}

/** Snapshots: how attention's allocations were found. */
export interface MemoryAttribution {
  by: "annotations" | "frames" | "unknown";
  reason?: string;
  sites?: string[];
  unattributed_bwd_allocs?: number;
  unattributed_bwd_bytes?: number;
  allocs_without_frames?: number;
  bytes_without_frames?: number;
  gqa_layers?: string[];
  devices_with_attention?: string[];
}

export interface MemorySpan {
  call: number;
  layer: string;
  stage: string;
  pass: "fwd" | "bwd";
  start_us: number;
  end_us: number;
}

export interface MemorySection {
  version: number;
  source: "profiler" | "snapshot";
  device: string;
  time_basis?: "us" | "index";
  events: number;
  peak_bytes: number;
  peak: MemoryPeak | null;
  score_matrix: { blocks: number; bytes_total: number; bytes_per_call_max: number };
  churn: Record<string, unknown> & { allocs: number; frees: number; bytes_allocated: number };
  curve: { start_us: number; t_us: number[]; bytes: number[]; reserved: number[] | null; points_total: number };
  spans: MemorySpan[];
  layers: MemoryLayer[];
  stages: { stage: string; pass: "fwd" | "bwd"; bytes_allocated: number; allocs: number; score_matrix_blocks: number }[];
  attribution?: MemoryAttribution;
  attention_peak?: { bytes: number; t_us: number; live_bytes: number; share: number | null };
  snapshot_section?: MemorySection;
}

export interface MemoryDoc {
  run: string;
  worker?: string;
  span?: string;
  metadata?: Record<string, unknown>;
  memory: MemorySection | null;
  note?: string;
}

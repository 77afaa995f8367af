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
}

export interface MemoryPeak {
  bytes: number;
  t_us: number;
  layer: string | null;
  stage: string | null;
  pass: "fwd" | "bwd" | null;
  attention_bytes: number;
  attention_share: number;
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

// The Reading panel of one call, shaped for display: expected against actual with each extra's cost
// and fix, host vs GPU, the kernels' fingerprints and occupancy, why not flash. Pure: the numbers
// are the engine's (GET /call's "reading"); this only words them, with units (test/reading_model.test.ts).
import { fmtBytes, fmtCount, fmtShare, fmtUs, num, ZERO_ESTIMATE } from "./format";
import type { CallReading, CallReadingKernel } from "./route_types";
import type { CallEvent, Evidence, Expected, HostCost, PhaseReading, WhyNotFlash } from "./types";

/** A piece the engine could not read: shown as "unknown" with the reason, never as 0. */
export interface Unknown {
  unknown: string;
}

/** The raw events a claim rests on, as the report lists them (the first few over the calls read alike):
 *  kernels by correlation id, or on a CPU trace ops by their ts. */
export interface ClaimIds {
  kernels: number[];
  opStarts: number[];
}

/** What picking a claim shows in One call: which of the call's events it names. */
export interface ClaimLink {
  events: CallEvent[]; // the call's events whose id the claim's evidence lists
  listed: number; // ids the report lists for the claim
  text: string;
}

export interface ExtraRow {
  cause: string;
  evidence: ClaimIds;
  label: string; // "+5 mask built per call"
  what: string;
  cost: string; // "8.10 ms per call · 8.10 ms per step"
  names: string;
  fix: string;
  source: string;
}

export interface FlagRow {
  flag: string;
  text: string; // "FP32 GEMM on CUDA cores ...: 1 per call, 20.1 µs per call; fix: ..."
  evidence: ClaimIds;
}

export interface ExpectedModel {
  headline: string; // "expected 5 ops per forward, ran 15"
  expected: number | null;
  ran: number;
  unit: string;
  steps: string;
  extras: ExtraRow[];
  flags: FlagRow[]; // FP32 GEMMs
  notes: string[]; // transposes, what ran outside the attention core
  source: string;
}

export interface HostModel {
  headline: string; // "56.7 µs on the host vs 9.4 µs on the GPU per call"
  verdict: "host-bound" | "GPU-bound" | "unknown" | "CPU only";
  verdictText: string;
  parts: string;
  launches: string;
  fix: string | null;
  source: string;
}

export interface KernelRow {
  name: string;
  stage: string;
  pass: string;
  inCall: string; // "3 launches · 17.4 µs in this call"
  fields: [string, string][]; // library, pass, dtype, math unit, tile, layout, arch, head dim, paging, mask, knob, split
  summary: string;
  flags: string[];
  occupancy: string; // numbers: theoretical, warps, blocks, limit, CUPTI
  occupancyConfig: string; // registers, shared memory, threads per block
  occupancyReading: string; // the engine's sentence (low by design, why the estimate reads 0, ...)
  tags: string[]; // "low by design", "0% estimate", "idle SMs"
  zeroEvidence: ClaimIds | null; // the launches whose estimate reads 0, when some do
}

export interface BackendRow {
  backend: string;
  state: "refused" | "eligible" | "unknown";
  refusals: { reason: string; fix: string; check: string }[];
  unread: string; // checks the trace cannot answer
}

export interface WhyNotFlashModel {
  judged: string; // "judged for sm80 (assumed: no GPU in the trace); ran math"
  backends: BackendRow[];
  rules: string;
}

/** The layer type's reading over the calls of one serving phase: one row of the panel's phase table. */
export interface PhaseRowModel {
  phase: string;
  calls: number;
  own: boolean; // this call's phase
  expected: ExpectedModel | Unknown;
  host: string; // "95.0 µs on the host vs 48.0 µs on the GPU per call"
  verdict: HostModel["verdict"] | null;
}

/** The reading split by serving phase: only where the report split it (two phases or more). */
export interface PhasesModel {
  phase: string; // this call's phase
  headline: string; // "this call is a decode: its layer type's reading over the 3 decode calls of 6"
  rows: PhaseRowModel[];
}

export interface ReadingModel {
  title: string;
  phases: PhasesModel | null;
  expected: ExpectedModel | Unknown;
  host: HostModel | Unknown;
  kernels: KernelRow[] | Unknown;
  kernelsOmitted: number;
  deviceArch: string | null;
  occupancyNote: string | null;
  whyNotFlash: WhyNotFlashModel | Unknown;
  backward: string;
}

export function isUnknown(v: unknown): v is Unknown {
  return typeof v === "object" && v !== null && "unknown" in v;
}

const NO_IDS: Evidence = { kernel_correlations: [], op_starts_us: [] };
const claimIds = (e: Evidence | null | undefined): ClaimIds => ({
  kernels: (e ?? NO_IDS).kernel_correlations ?? [], opStarts: (e ?? NO_IDS).op_starts_us ?? [],
});

const plural = (n: number, one: string, many = one + "s") => `${fmtCount(n)} ${n === 1 ? one : many}`;
// A per-call count can be a mean (0.33 of a kernel per call): at most two decimals, no trailing zeros.
const perCall = (v: number) => (Number.isInteger(v) ? String(v) : String(Number(v.toFixed(2))));

/** The events of a call that a claim's evidence names: kernels by correlation id, ops (CPU traces) by
 *  their ts as recorded; both are the trace's own numbers, so they match exactly or not at all. */
export function claimLink(ids: ClaimIds, events: CallEvent[]): ClaimLink {
  const corr = new Set(ids.kernels);
  const ts = new Set(ids.opStarts);
  const hit = events.filter((e) => (e.kind === "kernel" ? e.correlation !== undefined && corr.has(e.correlation)
    : e.ts_us !== undefined && ts.has(e.ts_us)));
  const listed = ids.kernels.length + ids.opStarts.length;
  const unit = ids.kernels.length ? "kernel" : "op";
  const idName = ids.kernels.length ? "correlation" : "ts";
  let text: string;
  if (!listed) {
    text = "the report lists no event for this claim (the trace recorded no id for its kernels)";
  } else if (hit.length) {
    // distinct ids: the kernels of a replayed graph share their launch's correlation id
    const shown = [...new Set(hit.map((e) => (e.kind === "kernel" ? e.correlation : e.ts_us)))];
    text = `${plural(hit.length, unit)} of this call highlighted (${idName} ${shown.join(", ")})`
      + (listed > shown.length ? `; the other ${listed - shown.length} ids the report lists are not among this call's events`
        : "");
  } else if (!events.some((e) => e.correlation !== undefined || e.ts_us !== undefined)) {
    text = "this call's events carry no ids (a report made before engine 16), so the claim cannot be linked to them";
  } else {
    text = `none of the ${plural(listed, unit)} the report lists for this claim ran in this call `
      + "(it keeps the first few over all the calls read alike)";
  }
  return { events: hit, listed, text };
}

function expectedModel(e: Expected, reason: string | undefined): ExpectedModel | Unknown {
  const unit = e.unit === "ops" ? "ops" : "kernels";
  const one = e.unit === "ops" ? "op" : "kernel";
  const ran = e.ran_min === e.ran_max ? String(e.ran) : `${e.ran} (from ${e.ran_min} to ${e.ran_max})`;
  const headline = e.expected === null
    ? `ran ${ran} ${e.ran === 1 && e.ran_min === e.ran_max ? one : unit} per forward; no count expected: `
      + (e.reason_unknown || reason || "unknown implementation")
    : `expected ${e.expected} ${e.expected === 1 ? one : unit} per forward, ran ${ran}`;
  const extras = e.extras.map((x): ExtraRow => ({
    cause: x.cause,
    evidence: claimIds(x.evidence),
    label: `+${perCall(x.per_call)} ${x.cause.replace(/_/g, " ")}${x.step ? ` (${x.step})` : ""}`,
    what: x.what,
    cost: `${fmtUs(x.us_per_call)} per call · ` + (num(x.us_per_step) === null
      ? "per step unknown: no ProfilerStep marked in the trace" : `${fmtUs(x.us_per_step)} per step`),
    names: x.names.join(", "),
    fix: x.fix || "no fix known",
    source: x.source,
  }));
  const flags = e.flags.map((f): FlagRow => ({
    flag: f.flag,
    text: `${f.what}: ${perCall(f.per_call)} per call, ${fmtUs(f.us_per_call)} per call; fix: ${f.fix}`,
    evidence: claimIds(f.evidence),
  }));
  const notes: string[] = [];
  if (e.transposes !== null) {
    notes.push(`aten::transpose ×${e.transposes} inside the attention op: metadata only, no kernel`
      + (e.transposes_expected !== null ? ` (the post counts ${e.transposes_expected} for this backend)` : ""));
  }
  if (e.outside.per_call > 0) {
    notes.push(`not counted: ${perCall(e.outside.per_call)} ${unit} per call outside the attention core `
      + `(${e.outside.names.join(", ")}), ${fmtUs(e.outside.us_per_call)} per call`);
  }
  return {
    headline, expected: e.expected, ran: e.ran, unit,
    steps: e.expected_steps ? e.expected_steps.join(" → ") : "", extras, flags, notes, source: e.source,
  };
}

function hostModel(h: HostCost, gpuUnknown: string | undefined): HostModel {
  if (h.cpu_only) return cpuHostModel(h);
  const gpu = num(h.gpu_us_per_call);
  const headline = gpu === null
    ? `${fmtUs(h.host_us_per_call)} on the host per call; GPU time unknown`
    : `${fmtUs(h.host_us_per_call)} on the host vs ${fmtUs(gpu)} on the GPU per call`;
  const verdict = h.host_bound === true ? "host-bound" : h.host_bound === false ? "GPU-bound" : "unknown";
  const verdictText = verdict === "host-bound" ? "host-bound: the GPU waits for the CPU"
    : verdict === "GPU-bound" ? "GPU-bound: the host keeps ahead of the GPU"
      : `host-bound or not: unknown (${gpuUnknown || h.summary})`;
  const scope = h.scope ? ` (inside ${h.scope})` : "";
  const parts = h.graph_replay ? "replayed from a graph: no host time per call"
    : `${fmtUs(h.attention_op_self_us_per_call)} attention op self${scope} · ${fmtUs(h.dispatch_us_per_call)} dispatch · `
      + `${fmtUs(h.launch_us_per_call)} in launches`;
  const apis = h.launch_apis.map((a) => `${a.name} ×${perCall(a.per_call)}${a.note ? ` (${a.note})` : ""}`);
  const extra = [
    h.occupancy_queries_per_call ? `${perCall(h.occupancy_queries_per_call)} occupancy queries` : "",
    h.syncs_per_call ? `${perCall(h.syncs_per_call)} syncs` : "",
  ].filter(Boolean);
  const launches = (apis.length ? `launches per call: ${apis.join(", ")}`
    : gpu === null ? "no launches (no GPU activity)" : "no launch recorded inside the call")
    + (extra.length ? `; ${extra.join(", ")} per call` : "");
  return { headline, verdict, verdictText, parts, launches, fix: h.fix, source: h.source };
}

// A trace with no GPU at all: the ops compute on the host, so their own time is the work, not dispatch,
// and there are no launches, syncs or GPU columns to show (zeros there would read as measurements).
function cpuHostModel(h: HostCost): HostModel {
  const own = `${fmtUs(h.dispatch_us_per_call)} in the ${h.scope ? "other " : ""}ops' own CPU work`;
  return {
    headline: `${fmtUs(h.host_us_per_call)} on the CPU per call`,
    verdict: "CPU only",
    verdictText: "no GPU in this trace: the ops compute on the host",
    parts: h.scope ? `${fmtUs(h.attention_op_self_us_per_call)} attention op self (inside ${h.scope}) · ${own}` : own,
    launches: "",
    fix: null,
    source: h.source,
  };
}

const FIELDS: [keyof NonNullable<CallReadingKernel["fingerprint"]>, string][] = [
  ["library", "library"], ["pass", "pass"], ["dtype", "dtype"], ["math_unit", "math unit"], ["tile", "tile"],
  ["layout", "layout"], ["arch", "built for"], ["head_dim", "head dim"], ["paging", "paging"], ["causal", "mask"],
  ["knob", "cuDNN knob"], ["split", "split"],
];

function kernelRow(k: CallReadingKernel, deviceArch: string | null): KernelRow {
  const fp = k.fingerprint;
  const fields: [string, string][] = [];
  if (fp) {
    for (const [key, label] of FIELDS) {
      const v = fp[key];
      if (typeof v !== "string" || !v) continue;
      fields.push([label, key === "arch" ? `${v} (ran on ${deviceArch || "a device of unknown architecture"})` : v]);
    }
  }
  const o = k.occupancy;
  let occupancy: string;
  let occupancyConfig = "";
  let occupancyReading: string;
  const tags: string[] = [];
  let zeroEvidence: ClaimIds | null = null;
  if (o) {
    const theo = num(o.theoretical_pct);
    const theoText = theo === null ? "theoretical unknown"
      : `theoretical ${fmtShare(theo / 100)} (${o.warps_per_sm} of ${o.max_warps_per_sm} warps, `
        + `${plural(o.blocks_per_sm ?? 0, "block")} per SM), limited by ${(o.limited_by || []).join(" and ")}`;
    const ach = num(o.achieved_pct);
    const zero = o.zero_estimate_cause;
    const achText = ach !== null ? `kineto est. achieved ${fmtShare(ach / 100)}`
      : zero ? `kineto est. 0%: ${ZERO_ESTIMATE[zero]}` : "estimate not recorded";
    occupancy = `${theoText} · ${achText}`;
    if (num(o.registers_per_thread) !== null) {
      occupancyConfig = `${o.registers_per_thread} registers per thread · ${fmtBytes(o.shared_memory_bytes)} shared memory · `
        + `${o.block_threads} threads per block` + ((o.configurations ?? 1) > 1 ? ` (of ${o.configurations} configurations)` : "");
    }
    occupancyReading = o.reading || "";
    if ((o.reading || "").includes("low by design")) tags.push("low by design");
    if (zero) tags.push(zero === "idle SMs" ? "idle SMs" : "0% estimate");
    if (zero) zeroEvidence = { kernels: o.evidence_correlations ?? [], opStarts: [] };
  } else {
    occupancy = "occupancy unknown";
    occupancyReading = k.occupancy_unknown || "not read";
  }
  return {
    name: k.name, stage: k.stage || "other", pass: k.pass || "fwd",
    inCall: `${plural(k.launches, "launch", "launches")} · ${fmtUs(k.us)} in this call`,
    fields, summary: fp ? fp.summary : `fingerprint unknown: ${k.fingerprint_unknown || "not decoded"}`,
    flags: fp ? fp.flags : [], occupancy, occupancyConfig, occupancyReading, tags, zeroEvidence,
  };
}

function whyNotFlashModel(w: WhyNotFlash): WhyNotFlashModel {
  return {
    judged: `judged for ${w.device}; ran ${w.ran || "an unknown backend"}`,
    rules: w.rules,
    backends: w.backends.map((b): BackendRow => ({
      backend: b.backend,
      state: b.eligible === false ? "refused" : b.eligible ? "eligible" : "unknown",
      refusals: b.refusals.map((x) => ({ reason: x.reason, fix: x.fix, check: x.check })),
      unread: b.unknown.length
        ? `not recorded, so not checked: ${b.unknown.map((u) => `${u.check} (${u.why})`).join("; ")}` : "",
    })),
  };
}

function phasesModel(r: CallReading): PhasesModel | null {
  // the whole row's phases when the answer carries them, else the call's own phase alone
  const list: PhaseReading[] = r.phases?.length ? r.phases : r.phase_reading ? [r.phase_reading] : [];
  if (!list.length) return null; // not split: a trace of one phase or none reads as before
  const phase = r.phase || "unknown";
  const own = list.find((p) => p.phase === phase);
  const total = num(r.calls);
  const headline = own
    ? `this call is ${phase === "unknown" ? "of unknown phase" : `a ${phase}`}: its layer type's reading over the `
      + `${plural(own.calls, `${phase} call`)}${total !== null ? ` of ${fmtCount(total)}` : ""}`
    : `this call's phase (${phase}) has no reading of its own in the report`;
  const rows = list.map((p): PhaseRowModel => {
    const h = p.host ? hostModel(p.host, undefined) : null;
    return {
      phase: p.phase, calls: p.calls, own: p.phase === phase,
      expected: p.expected ? expectedModel(p.expected, undefined)
        : { unknown: "no forward op or kernel of these calls was read" },
      host: h ? h.headline : "host side unknown: no host side recorded for these calls",
      verdict: h ? h.verdict : null,
    };
  });
  return { phase, headline, rows };
}

export function readingModel(r: CallReading | null | undefined): ReadingModel | null {
  if (!r) return null;
  const u = r.unknown || {};
  const layer = u.layer;
  const title = [r.layer_type || r.layer || "unknown layer", r.implementation || "unknown implementation",
    num(r.calls) !== null ? plural(r.calls as number, "call") : null].filter(Boolean).join(" · ");
  return {
    title,
    phases: phasesModel(r),
    expected: r.expected ? expectedModel(r.expected, u.expected) : { unknown: u.expected || layer || "not read" },
    host: r.host ? hostModel(r.host, u.gpu) : { unknown: u.host || layer || "not read" },
    kernels: r.kernels.length ? r.kernels.map((k) => kernelRow(k, r.device_arch)) : { unknown: u.kernels || "no kernels" },
    kernelsOmitted: r.kernels_omitted || 0,
    deviceArch: r.device_arch,
    occupancyNote: r.occupancy_note,
    whyNotFlash: r.why_not_flash ? whyNotFlashModel(r.why_not_flash) : { unknown: u.why_not_flash || "not read" },
    backward: u.backward || "",
  };
}

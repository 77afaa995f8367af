// The one-call timeline, shaped for drawing: lanes named by CPU thread and nesting depth and by GPU
// stream, and the call split into forward and backward when the two ran far apart. Pure: tested in
// test/timeline_model.test.ts.
import type { CallEvent, CallSample } from "./types";
import type { Pass } from "./tags";
import { stageIndex } from "./model";

export interface TimelineItem {
  lane: number;
  name: string;
  kind: "op" | "kernel";
  stage: string;
  pass: Pass;
  start: number; // µs since the start of its segment
  dur: number;
  event: CallEvent; // the sample's event it draws (a claim of the Reading panel highlights it)
}

/** One chart: the whole call, or its forward or its backward part when they are far apart. */
export interface TimelineSegment {
  title: string; // "whole call", "forward", "backward"
  pass: Pass | null;
  offset: number; // µs from the call's start to this segment's start
  span: number;
  lanes: string[];
  items: TimelineItem[];
}

export interface TimelineModel {
  segments: TimelineSegment[];
  stages: string[];
  gapUs: number | null; // between the end of the forward and the start of the backward, when split
  fwdUs: number | null; // how long each part ran (first event to last)
  bwdUs: number | null;
}

const n0 = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** Far apart: the gap between forward and backward is longer than either part. */
function farApart(fwd: [number, number], bwd: [number, number]): boolean {
  const gap = bwd[0] - fwd[1];
  return gap > 0 && gap > Math.max(fwd[1] - fwd[0], bwd[1] - bwd[0]);
}

/** The stage an event is drawn in: an op left "other" that holds deeper ops of its thread is a call
 *  wrapper (the module, aten::scaled_dot_product_attention around its kernels' ops), not "copies, layout". */
export function drawnStage(e: CallEvent, events: CallEvent[]): string {
  const stage = e.stage || "other";
  if (stage !== "other" || e.kind === "kernel") return stage;
  const a = n0(e.start_us);
  const b = a + n0(e.dur_us);
  const holds = events.some((x) => x !== e && x.kind !== "kernel" && (x.thread ?? "") === (e.thread ?? "")
    && n0(x.depth) > n0(e.depth) && n0(x.start_us) >= a && n0(x.start_us) + n0(x.dur_us) <= b);
  return holds ? "call" : stage;
}

function extent(events: CallEvent[]): [number, number] | null {
  if (!events.length) return null;
  return [Math.min(...events.map((e) => n0(e.start_us))), Math.max(...events.map((e) => n0(e.start_us) + n0(e.dur_us)))];
}

/** CPU ops one lane per thread and nesting depth; kernels one lane per GPU stream (overlapping
 *  kernels of one stream, as a report may list, packed into numbered sub-lanes). */
function segment(events: CallEvent[], title: string, pass: Pass | null, offset: number): TimelineSegment {
  const ops = events.filter((e) => e.kind !== "kernel");
  const kernels = events.filter((e) => e.kind === "kernel").sort((a, b) => n0(a.start_us) - n0(b.start_us));
  const threads = [...new Set(ops.map((e) => e.thread ?? ""))];
  const lanes: string[] = [];
  const laneOf = new Map<string, number>();
  const oneThread = threads.length <= 1;
  for (const t of threads) {
    const depths = [...new Set(ops.filter((e) => (e.thread ?? "") === t).map((e) => n0(e.depth)))].sort((a, b) => a - b);
    for (const d of depths) {
      laneOf.set(`${t}\u0000${d}`, lanes.length);
      lanes.push(t && !oneThread ? `thread ${t} · depth ${d}` : t ? `depth ${d} (thread ${t})` : `depth ${d}`);
    }
  }
  const items: TimelineItem[] = ops.map((e) => ({
    lane: laneOf.get(`${e.thread ?? ""}\u0000${n0(e.depth)}`)!, name: e.name, kind: "op", stage: drawnStage(e, ops),
    pass: e.pass === "bwd" ? "bwd" : "fwd", start: n0(e.start_us) - offset, dur: n0(e.dur_us), event: e,
  }));
  const streams = [...new Set(kernels.map((k) => k.stream ?? ""))];
  for (const s of streams) {
    const ends: number[] = [];
    const mine = kernels.filter((k) => (k.stream ?? "") === s);
    const placed: [CallEvent, number][] = [];
    for (const k of mine) {
      const start = n0(k.start_us);
      let sub = ends.findIndex((end) => end <= start);
      if (sub < 0) { sub = ends.length; ends.push(0); }
      ends[sub] = start + n0(k.dur_us);
      placed.push([k, sub]);
    }
    const base = lanes.length;
    const name = s ? `GPU stream ${s}` : "GPU";
    for (let i = 0; i < ends.length; i++) lanes.push(ends.length > 1 ? `${name} (${i + 1})` : name);
    for (const [k, sub] of placed) {
      items.push({
        lane: base + sub, name: k.name, kind: "kernel", stage: k.stage || "other",
        pass: k.pass === "bwd" ? "bwd" : "fwd", start: n0(k.start_us) - offset, dur: n0(k.dur_us), event: k,
      });
    }
  }
  const span = items.reduce((m, it) => Math.max(m, it.start + it.dur), 0);
  return { title, pass, offset, span, lanes, items };
}

export function timelineModel(sample: CallSample | null | undefined): TimelineModel {
  const events = sample?.events || [];
  const fwd = events.filter((e) => e.pass !== "bwd");
  const bwd = events.filter((e) => e.pass === "bwd");
  const fx = extent(fwd);
  const bx = extent(bwd);
  // The legend lists what is drawn: stages of events that take time (a 0 µs dropout op of p=0 draws nothing).
  const stages = [...new Set(events.filter((e) => n0(e.dur_us) > 0).map((e) => drawnStage(e, events)))]
    .sort((a, b) => stageIndex(a) - stageIndex(b));
  if (fx && bx && farApart(fx, bx)) {
    return {
      segments: [segment(fwd, "forward", "fwd", fx[0]), segment(bwd, "backward", "bwd", bx[0])],
      stages, gapUs: bx[0] - fx[1], fwdUs: fx[1] - fx[0], bwdUs: bx[1] - bx[0],
    };
  }
  const segments = events.length ? [segment(events, "whole call", null, 0)] : [];
  return { segments, stages, gapUs: null, fwdUs: fx ? fx[1] - fx[0] : null, bwdUs: bx ? bx[1] - bx[0] : null };
}

/** The steps that have sampled calls, and the calls of one step, for the pickers. */
export function callChoices(samples: CallSample[], step: number | null): { steps: number[]; calls: CallSample[] } {
  const steps = [...new Set(samples.map((s) => n0(s.step)))].sort((a, b) => a - b);
  const calls = samples.filter((s) => step === null || n0(s.step) === step);
  return { steps, calls };
}

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { overviewModel, spread } from "../src/overview_model";
import type { Report } from "../src/types";

const fixture = (name: string): Report => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));
const owl = fixture("overview_owlv2");
const nccl = fixture("overview_nccl");

describe("the Overview's model (overview_model.ts)", () => {
  it("draws the step bar from the parts with time, their shares summing to 1, in precedence order", () => {
    const m = overviewModel(owl);
    expect(m.present).toBe(true);
    expect(m.bar.map((p) => p.part)).toEqual(["attention_fwd", "other_matmul", "other_compute", "memcpy", "memset", "idle"]);
    expect(m.bar.reduce((a, p) => a + p.share, 0)).toBeCloseTo(1, 9);
    const idle = m.bar.find((p) => p.part === "idle")!;
    expect(idle.us / 1e3).toBeCloseTo(511.53, 2); // the 511.5 ms
    expect(m.span! - idle.us).toBeCloseTo(m.busy!, 2); // busy = span - idle
    expect(m.sentence).toBe(owl.overview.limit.sentence);
    expect(m.attentionOfBusy!).toBeCloseTo(0.9046, 3);
    expect(m.steps).toHaveLength(1);
    expect(new Set(m.bar.map((p) => p.color)).size).toBe(m.bar.length); // one colour per part
  });

  it("carries exposed and hidden communication and the per-step spread of the NCCL trace", () => {
    const m = overviewModel(nccl);
    expect(m.communication!.total / 1e3).toBeCloseTo(46.88, 2);
    expect(m.communication!.exposed / 1e3).toBeCloseTo(39.56, 2);
    expect(m.bar.find((p) => p.part === "communication")!.us).toBeCloseTo(m.communication!.exposed, 3);
    expect(m.steps.map((s) => s.label)).toEqual(["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]);
    const idle = spread(m.steps.map((s) => s.idle))!;
    const want = Object.fromEntries(nccl.overview.spread.filter((s) => s.figure === "idle_us").map((s) => ["x", s]))["x"];
    expect([idle.min, idle.median, idle.max]).toEqual([want.min_us, want.median_us, want.max_us]);
    expect(m.host.optimizer).toBeGreaterThan(0);
    expect(m.kind).toBe("host");
  });

  it("says so for a report without the section, and never invents a bar", () => {
    const m = overviewModel({} as Report);
    expect(m.present).toBe(false);
    expect(m.bar).toEqual([]);
    expect(m.sentence).toMatch(/no step overview/);
  });
});

describe("idle split and serving phases (issue 48)", () => {
  it("carries HTA's kernel wait beside host and sync wait; the three sum to idle", () => {
    const m = overviewModel(owl);
    const idle = m.bar.find((p) => p.part === "idle")!.us;
    expect(m.idleKernel!).toBeGreaterThan(0);
    expect(m.idleHost! + m.idleSync! + m.idleKernel!).toBeCloseTo(idle, 2);
  });

  it("gives each phase its roofline point: a decode judged on the KV cache it reads", async () => {
    const { phaseRoof } = await import("../src/views/overview");
    const serving = fixture("overview_serving");
    const m = overviewModel(serving);
    const decode = m.phases.find((p) => p.phase === "decode")!;
    expect(decode.calls).toBe(4);
    expect(decode.roofline!.kvCache).toBe(true);
    expect(decode.roofline!.bytes).toBe(4 * 2 * 8 * 32 * 4096 * 128 * 2); // 2 (K, V) · B · Hkv · Lk · D · 2 B, per call
    expect(decode.roofline!.bound).toBe("memory");
    expect(phaseRoof(decode)).toMatch(/^memory-bound: KV cache read 2\.0 GiB, [\d.]+ TB\/s$/);
    expect(m.phases.find((p) => p.phase === "unknown")!.roofline!.bound).toBe("compute");
  });
});

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { isUnknown, readingModel, type ExpectedModel, type PhasesModel } from "../src/reading_model";
import { fmtUs } from "../src/format";
import type { CallAnswer, CallReading } from "../src/types";

// Real /call answers of a built vLLM FA2 serving trace (fixtures/README.md: tests/make_call_phases_fixture.py):
// one call per phase of the six-layer trace, and one call of an all-decode trace.
const answers = JSON.parse(readFileSync(new URL("./fixtures/call_phases.json", import.meta.url), "utf8")) as
  { run: string; answer: CallAnswer }[];
const served = answers.filter((a) => a.run === "served").map((a) => a.answer);
const known = <T>(v: T | { unknown: string }): T => {
  if (isUnknown(v)) throw new Error(`unknown: ${v.unknown}`);
  return v as T;
};

describe("the reading by serving phase", () => {
  it("has one call of each phase to read", () => {
    expect(served.map((a) => a.reading!.phase)).toEqual(["decode", "prefill", "mixed"]);
  });

  for (const a of served) {
    const r = a.reading!;
    it(`names the ${r.phase} call's phase and reads every phase of its layer type as the answer does`, () => {
      const ph = readingModel(r)!.phases as PhasesModel;
      expect(ph).not.toBeNull();
      expect(ph.phase).toBe(r.phase);
      const own = r.phases!.find((p) => p.phase === r.phase)!;
      expect(own).toEqual(r.phase_reading);
      expect(ph.headline).toBe(`this call is a ${r.phase}: its layer type's reading over the ${own.calls} ${r.phase} `
        + `call${own.calls === 1 ? "" : "s"} of ${r.calls}`);
      expect(ph.rows.map((p) => [p.phase, p.calls, p.own])).toEqual(
        r.phases!.map((p) => [p.phase, p.calls, p.phase === r.phase]));
      expect(ph.rows.reduce((s, p) => s + p.calls, 0)).toBe(r.calls);  // the phases split the row's calls
      for (const [i, p] of r.phases!.entries()) {
        const e = known<ExpectedModel>(ph.rows[i].expected);
        expect([e.expected, e.ran]).toEqual([p.expected!.expected, p.expected!.ran]);
        expect(e.headline).toBe(`expected ${p.expected!.expected} kernel per forward, ran ${p.expected!.ran}`);
        expect(e.extras.map((x) => [x.cause, x.label])).toEqual(
          p.expected!.extras.map((x) => [x.cause, `+${x.per_call} ${x.cause.replace(/_/g, " ")}`]));
        for (const [j, x] of p.expected!.extras.entries()) expect(e.extras[j].cost.startsWith(`${fmtUs(x.us_per_call)} per call`)).toBe(true);
        expect(ph.rows[i].host).toBe(`${fmtUs(p.host!.host_us_per_call)} on the host vs ${fmtUs(p.host!.gpu_us_per_call!)} on the GPU per call`);
      }
    });

    it(`counts the ${r.phase} call's own kernels as its phase's "ran"`, () => {
      // every call of one phase ran alike here (ran_min = ran_max), so this call's kernels are its phase's count
      const own = r.phase_reading!.expected!;
      expect(own.ran_min).toBe(own.ran_max);
      expect(a.events.filter((e) => e.kind === "kernel" && e.pass === "fwd").length).toBe(own.ran);
    });
  }

  it("a decode's split-KV combine is a decode extra, not a prefill one", () => {
    const rows = readingModel(served[0].reading)!.phases!.rows;
    const causes = (ph: string) => known<ExpectedModel>(rows.find((p) => p.phase === ph)!.expected).extras.map((x) => x.cause);
    expect(causes("decode")).toContain("split_kv_reduce");
    expect(causes("prefill")).not.toContain("split_kv_reduce");
  });

  it("falls back to the call's own phase when the answer has no list of phases (an older server)", () => {
    const r: CallReading = { ...served[1].reading!, phases: undefined };
    const ph = readingModel(r)!.phases!;
    expect(ph.rows.map((p) => p.phase)).toEqual(["prefill"]);
  });

  it("changes nothing where the reading is not split: one phase, or no phase at all", () => {
    const one = answers.find((a) => a.run === "decode_only")!.answer.reading!;
    expect(one.phase).toBe("decode");
    expect(one.phase_reading).toBeNull();
    expect(readingModel(one)!.phases).toBeNull();
    const plain = JSON.parse(readFileSync(new URL("./fixtures/call_readings.json", import.meta.url), "utf8")) as Record<string, CallReading>;
    for (const r of Object.values(plain)) expect(readingModel(r)!.phases).toBeNull();
  });
});

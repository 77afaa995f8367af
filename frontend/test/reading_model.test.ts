import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { claimLink, isUnknown, readingModel, type ExpectedModel, type HostModel, type KernelRow, type WhyNotFlashModel } from "../src/reading_model";
import type { CallAnswer, CallReading } from "../src/route_types";

// Real /call readings (fixtures/README.md): two H100 traces and a CPU recording of the post's SDPA math variant.
const fx = JSON.parse(readFileSync(new URL("./fixtures/call_readings.json", import.meta.url), "utf8")) as Record<string, CallReading>;
const known = <T>(v: T | { unknown: string }): T => {
  if (isUnknown(v)) throw new Error(`unknown: ${v.unknown}`);
  return v as T;
};

describe("expected against actual", () => {
  it("words the post's math reading: expected, ran, each extra with its cost per call and per step and its fix", () => {
    const r = fx.post_sdpa_math_cpu;
    const e = known<ExpectedModel>(readingModel(r)!.expected);
    expect(e.headline).toBe(`expected ${r.expected!.expected} ops per forward, ran ${r.expected!.ran}`);
    expect(e.extras.map((x) => x.cause)).toEqual(r.expected!.extras.map((x) => x.cause));
    const mask = e.extras.find((x) => x.cause === "mask_built_per_call")!;
    const src = r.expected!.extras.find((x) => x.cause === "mask_built_per_call")!;
    expect(mask.label).toBe(`+${src.per_call} mask built per call`);
    expect(mask.cost).toMatch(/^[\d.]+ (µs|ms) per call · [\d.]+ (µs|ms) per step$/);
    expect(mask.fix).toContain("is_causal");
    expect(mask.names).toContain("aten::tril");
    expect(e.extras.find((x) => x.cause === "repeated_step")!.label).toBe("+1 repeated step (scale)");
  });

  it("gives a range when calls ran different counts, and a fractional extra as a mean", () => {
    const e = known<ExpectedModel>(readingModel(fx.owlv2_eager)!.expected);
    expect(e.headline).toBe("expected 3 kernels per forward, ran 7 (from 7 to 9)");
    expect(e.extras.find((x) => x.cause === "repeated_step")!.label).toBe("+0.33 repeated step (mask)");
    expect(e.notes.some((n) => n.startsWith("not counted: 7.67 kernels per call outside the attention core"))).toBe(true);
  });

  it("says per step is unknown, not 0, without ProfilerSteps", () => {
    const r = structuredClone(fx.post_sdpa_math_cpu);
    r.expected!.extras[0].us_per_step = null;
    expect(known<ExpectedModel>(readingModel(r)!.expected).extras[0].cost).toContain("per step unknown: no ProfilerStep");
  });

  it("names the metadata-only transposes against the post's count", () => {
    const e = known<ExpectedModel>(readingModel(fx.bert_flash)!.expected);
    expect(e.headline).toBe("expected 1 kernel per forward, ran 1");
    expect(e.extras).toEqual([]);
    expect(e.notes).toContain("aten::transpose ×4 inside the attention op: metadata only, no kernel (the post counts 4 for this backend)");
  });
});

describe("host vs GPU", () => {
  it("calls the H100 flash call host-bound, with where the host time went and the fix", () => {
    const h = known<HostModel>(readingModel(fx.bert_flash)!.host);
    expect(h.headline).toBe("56.7 µs on the host vs 9.4 µs on the GPU per call");
    expect(h.verdict).toBe("host-bound");
    expect(h.parts).toBe("37.1 µs attention op self (inside aten::scaled_dot_product_attention) · 19.6 µs dispatch · 5.0 µs in launches");
    expect(h.launches).toBe("launches per call: cudaLaunchKernel ×1 (runtime-API launch)");
    expect(h.fix).toContain("CUDA graph");
  });

  it("calls the OWLv2 eager call GPU-bound, with no fix", () => {
    const h = known<HostModel>(readingModel(fx.owlv2_eager)!.host);
    expect(h.verdict).toBe("GPU-bound");
    expect(h.fix).toBeNull();
  });

  it("on a CPU trace: CPU only, the ops' own work (not dispatch), no launch or GPU figures, never 0 µs", () => {
    const r = fx.post_sdpa_math_cpu;
    const h = known<HostModel>(readingModel(r)!.host);
    expect(h.verdict).toBe("CPU only");
    expect(h.headline).toBe(`${(r.host!.host_us_per_call / 1000).toFixed(2)} ms on the CPU per call`);
    expect(h.parts).toContain("in the other ops' own CPU work");
    expect(h.parts).not.toContain("dispatch");
    expect(h.launches).toBe("");
    expect([h.headline, h.parts, h.verdictText].join(" ")).not.toMatch(/GPU per call|in launches|0\.0 µs/);
  });

  it("a report made before cpu_only (the field absent) reads as before: GPU time unknown with the reason", () => {
    const { cpu_only: _, ...old } = fx.post_sdpa_math_cpu.host!;
    const h = known<HostModel>(readingModel({ ...fx.post_sdpa_math_cpu, host: old })!.host);
    expect(h.verdict).toBe("unknown");
    expect(h.headline).toMatch(/on the host per call; GPU time unknown$/);
  });
});

describe("kernels: fingerprints and occupancy", () => {
  it("decodes the flash kernel and reads its occupancy as low by design", () => {
    const ks = known<KernelRow[]>(readingModel(fx.bert_flash)!.kernels);
    expect(ks.map((k) => k.name)).toEqual(fx.bert_flash.kernels.map((k) => k.name));
    const flash = ks.find((k) => k.name.includes("flash_fwd_kernel"))!;
    expect(Object.fromEntries(flash.fields)).toMatchObject({ library: "FlashAttention", pass: "fwd", dtype: "bf16" });
    expect(flash.occupancy).toBe("theoretical 12.5% (8 of 64 warps, 2 blocks per SM), limited by registers · kineto est. achieved 1.0%");
    expect(flash.occupancyConfig).toBe("255 registers per thread · 48.0 KiB shared memory · 128 threads per block");
    expect(flash.tags).toEqual(["low by design"]);
    expect(flash.inCall).toMatch(/^1 launch · [\d.]+ µs in this call$/);
  });

  it("shows the architecture a kernel was built for against the device, with the flag", () => {
    const gemm = known<KernelRow[]>(readingModel(fx.bert_flash)!.kernels).find((k) => k.name.includes("cutlass_80"))!;
    expect(Object.fromEntries(gemm.fields)["built for"]).toBe("sm80 (ran on sm90)");
    expect(gemm.flags[0]).toMatch(/^built for sm80, ran on sm90/);
  });

  it("says why the 0% estimate of a launch over 48 KiB of shared memory reads 0, beside the theoretical figure", () => {
    const gemm = known<KernelRow[]>(readingModel(fx.owlv2_eager)!.kernels).find((k) => k.name.startsWith("sm90_xmma_gemm"))!;
    expect(gemm.occupancy).toBe("theoretical 18.8% (12 of 64 warps, 1 block per SM), limited by registers and shared memory · "
      + "kineto est. 0%: over the 48 KiB it assumes");
    expect(gemm.tags).toEqual(["0% estimate"]);
  });

  it("says why a memset has no occupancy, and why a CPU trace has no kernels", () => {
    const memset = known<KernelRow[]>(readingModel(fx.owlv2_eager)!.kernels).find((k) => k.name === "Memset (Device)")!;
    expect(memset.occupancy).toBe("occupancy unknown");
    expect(memset.occupancyReading).toContain("memcpy and memset have none");
    const cpu = readingModel(fx.post_sdpa_math_cpu)!.kernels;
    expect(isUnknown(cpu) && cpu.unknown).toContain("the trace recorded the CPU only");
  });
});

describe("why not flash", () => {
  it("judges the CPU call by the CPU's rules: its flash kernel only, no GPU backend", () => {
    const w = known<WhyNotFlashModel>(readingModel(fx.post_sdpa_math_cpu)!.whyNotFlash);
    expect(w.judged).toBe("judged for the CPU (PyTorch's CPU SDPA: its flash kernel or math; no efficient or cuDNN kernel); ran math");
    expect(w.backends.map((b) => b.backend)).toEqual(["flash_cpu"]);
    const flash = w.backends[0];
    expect(flash.state).toBe("eligible");
    expect(flash.refusals).toEqual([]);
    expect(flash.unread).toContain("sdpa_kernel");
  });

  it("says why it was not read for an eager call", () => {
    const w = readingModel(fx.owlv2_eager)!.whyNotFlash;
    expect(isUnknown(w) && w.unknown).toContain("no aten::scaled_dot_product_attention");
  });
});

describe("the panel as a whole", () => {
  it("titles it by layer type, implementation and calls; says the backward is not read", () => {
    const m = readingModel(fx.bert_flash)!;
    expect(m.title).toBe("BertSdpaSelfAttention · flash · 4 calls");
    expect(m.backward).toContain("forward only");
    expect(readingModel(null)).toBeNull();
  });

  it("a layer the report does not keep: every piece unknown with that reason", () => {
    const r: CallReading = { ...fx.bert_flash, layer_type: null, calls: null, expected: null, host: null, why_not_flash: null,
      unknown: { layer: "layer 'x' is not among the report's layers", backward: "b" } };
    const m = readingModel(r)!;
    expect(m.title).toBe("BertSdpaSelfAttention_0 · flash");
    expect(isUnknown(m.expected) && m.expected.unknown).toContain("not among the report's layers");
    expect(isUnknown(m.host) && m.host.unknown).toContain("not among the report's layers");
  });
});

// Whole real /call answers (events and reading, fixtures/README.md): OWLv2 eager H100 calls #0 and #36,
// and the CPU recording of the post's SDPA math variant, call #0.
const calls = JSON.parse(readFileSync(new URL("./fixtures/call_claims.json", import.meta.url), "utf8")) as Record<string, CallAnswer>;

describe("a claim linked to the events of the call", () => {
  it("highlights the call's layout copies by the correlation ids the extra's evidence lists", () => {
    const c = calls.owlv2_eager_call0;
    const x = known<ExpectedModel>(readingModel(c.reading)!.expected).extras.find((e) => e.cause === "layout_copy")!;
    const listed = c.reading!.expected!.extras.find((e) => e.cause === "layout_copy")!.evidence.kernel_correlations;
    expect(x.evidence.kernels).toEqual(listed);
    const link = claimLink(x.evidence, c.events);
    const own = c.events.filter((e) => e.kind === "kernel" && listed.includes(e.correlation!));
    expect(link.events).toEqual(own);
    expect(link.events.length).toBe(4); // +4 layout copy per call: this first call's four are the evidence's first four
    expect(link.events.every((e) => e.name.includes("direct_copy_kernel"))).toBe(true);
    expect(link.text).toBe(`4 kernels of this call highlighted (correlation ${own.map((e) => e.correlation).join(", ")}); `
      + "the other 4 ids the report lists are not among this call's events");
  });

  it("links a 0% occupancy figure to the launches that read 0", () => {
    const c = calls.owlv2_eager_call36;
    const k = known<KernelRow[]>(readingModel(c.reading)!.kernels).find((r) => r.zeroEvidence)!;
    expect(k.tags).toContain("0% estimate");
    const link = claimLink(k.zeroEvidence!, c.events);
    expect(link.events.length).toBe(4);
    expect(link.events.every((e) => e.name === k.name)).toBe(true);
  });

  it("on a CPU trace links an extra to its ops by their ts as recorded", () => {
    const c = calls.post_sdpa_math_cpu_call0;
    const src = c.reading!.expected!.extras.find((e) => e.cause === "mask_built_per_call")!;
    const x = known<ExpectedModel>(readingModel(c.reading)!.expected).extras.find((e) => e.cause === "mask_built_per_call")!;
    const link = claimLink(x.evidence, c.events);
    expect(link.events.map((e) => e.ts_us)).toEqual(src.evidence.op_starts_us);
    expect(link.events.every((e) => e.kind === "op" && src.names.includes(e.name))).toBe(true);
    expect(link.text).toMatch(/^5 ops of this call highlighted \(ts [\d.]+(, [\d.]+){4}\)$/);
  });

  it("says why nothing is highlighted: evidence from other calls, an older report, no ids at all", () => {
    const c0 = calls.owlv2_eager_call0;
    const repeated = known<ExpectedModel>(readingModel(c0.reading)!.expected).extras.find((e) => e.cause === "repeated_step")!;
    const none = claimLink(repeated.evidence, c0.events); // its evidence is from calls #24 to #31
    expect(none.events).toEqual([]);
    expect(none.text).toBe("none of the 8 kernels the report lists for this claim ran in this call "
      + "(it keeps the first few over all the calls read alike)");
    const old = c0.events.map(({ correlation: _, ...e }) => e);
    expect(claimLink(repeated.evidence, old).text).toContain("a report made before engine 16");
    expect(claimLink({ kernels: [], opStarts: [] }, c0.events).text).toContain("the report lists no event for this claim");
  });
});

import { describe, expect, it } from "vitest";
import { distinctShortNames, fmtBytes, fmtCount, fmtDeltaPct, fmtDeltaUs, fmtShare, fmtSpan, fmtUs, occupancyText, shortKernelName } from "../src/format";
import { decodeList, DEFAULT_STATE, encodeList, formatHash, mergeHash, parseHash, stateFromParams, stateToParams } from "../src/state";

describe("format", () => {
  it("reads a kernel's occupancy: theoretical and its limit, kineto's estimate or why it reads 0", () => {
    // the H100 BERT trace's flash kernel and the OWLv2 trace's cuBLAS kernel (tests/test_kernel_reading.py)
    expect(occupancyText({ name: "flash", theoretical_pct: 12.5, limited_by: ["registers"], achieved_pct: 1,
      reading: "theoretical 12.5% ...; low by design: registers/shared memory keep the tiles on chip" }))
      .toBe("occupancy 12.5% (registers) · kineto est. 1% · low by design");
    expect(occupancyText({ name: "gemm", theoretical_pct: 18.75, limited_by: ["registers", "shared memory"], achieved_pct: null,
      zero_estimate_cause: "shared memory over the default limit", reading: "" }))
      .toBe("occupancy 18.75% (registers, shared memory) · kineto est. 0%: over the 48 KiB it assumes");
    expect(occupancyText({ name: "attn_fwd", theoretical_pct: null, reading: "theoretical occupancy unknown" })).toBe("occupancy unknown");
  });
  it("formats times, shares, bytes, counts", () => {
    expect(fmtUs(37.408)).toBe("37.4 µs");
    expect(fmtUs(513124.885)).toBe("513.12 ms");
    expect(fmtUs(2.5e6)).toBe("2.50 s");
    expect(fmtUs(undefined)).toBe("—");
    expect(fmtUs(NaN)).toBe("—");
    expect(fmtShare(0.905366)).toBe("90.5%");
    expect(fmtDeltaPct(-71.2)).toBe("\u221271%");
    expect(fmtDeltaPct(12)).toBe("+12%");
    expect(fmtDeltaPct(null)).toBe("new");
    expect(fmtDeltaPct(0.2)).toBe("+0.2%");
    expect(fmtDeltaUs(-1500)).toBe("\u22121.50 ms");
    expect(fmtBytes(860295200)).toBe("820.4 MiB");
    expect(fmtBytes(12)).toBe("12 B");
    expect(fmtCount(1234567)).toBe("1,234,567");
  });
  it("shortens C++ kernel names, keeps odd names whole", () => {
    expect(shortKernelName("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16>(c10::BFloat16*, int)")).toBe("cunn_SoftMaxForward");
    expect(shortKernelName("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1::Params)"))
      .toBe("cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1");
    expect(shortKernelName("aiter::fmha_fwd_hd128_bf16_rtz")).toBe("fmha_fwd_hd128_bf16_rtz");
    expect(shortKernelName("attn_fwd")).toBe("attn_fwd");
    expect(shortKernelName("<img src=x onerror=alert(1)>")).toBe("<img src=x onerror=alert(1)>");
    expect(shortKernelName("x".repeat(200))).toHaveLength(80);
  });
});

describe("URL state", () => {
  it("reads and writes TensorBoard's hash format", () => {
    expect(parseHash("#tb_attn&a=1&b=x%20y")).toEqual({ tab: "tb_attn", params: [["a", "1"], ["b", "x y"]] });
    expect(parseHash("")).toEqual({ tab: "", params: [] });
    expect(parseHash("#t&bad=%E0%A4%A")).toEqual({ tab: "t", params: [] });
    expect(formatHash({ tab: "tb_attn", params: [["k", "a&b=c"]] })).toBe("#tb_attn&k=a%26b%3Dc");
  });
  it("round-trips a state, run names with commas and markup included", () => {
    const s = { ...DEFAULT_STATE, view: "compare" as const, run: "r,1 <b>", compare: ["a,b", "c d", "<img src=x>"], call: 3, pass: "bwd" as const };
    const hash = mergeHash("#tb_attn&darkMode=true&attn_view=summary", s, "tb_attn");
    expect(hash.startsWith("#tb_attn&darkMode=true&")).toBe(true);
    const back = stateFromParams(parseHash(hash).params);
    expect(back).toEqual(s);
    expect(decodeList(encodeList(["a,b", "", "c"]))).toEqual(["a,b", "c"]);
  });
  it("ignores junk and leaves defaults out of the URL", () => {
    const s = stateFromParams([["attn_view", "nope"], ["attn_call", "-1"], ["attn_pass", "sideways"], ["attn_basis", "tpu"], ["other", "x"]]);
    expect(s).toEqual(DEFAULT_STATE);
    expect(stateToParams(DEFAULT_STATE)).toEqual([]);
    expect(stateFromParams([["attn_call", ""]]).call).toBeNull();
  });
});

describe("spans and repeated short names", () => {
  it("shows a trace_handler span (ns since the epoch) as a UTC time, other spans as they are", () => {
    expect(fmtSpan("1700000000000000001")).toBe("2023-11-14 22:13:20 UTC");
    expect(fmtSpan("1700000000123")).toBe("2023-11-14 22:13:20 UTC");
    expect(fmtSpan("100")).toBe("100");
    expect(fmtSpan("trace.json")).toBe("trace.json");
    expect(fmtSpan("9999999999999999999")).toBe("9999999999999999999");  // not a plausible time
    expect(fmtSpan(null)).toBe("");
  });
  it("tells apart kernels whose short names collide", () => {
    const fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";
    const copy = "void at::native::vectorized_elementwise_kernel<4, at::native::direct_copy_kernel_cuda, std::array<char*, 2ul> >(int)";
    const fill2 = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 2ul> >(int)";
    const m = distinctShortNames([fill, copy, fill2, "attn_fwd", fill]);
    expect(m.get("attn_fwd")).toBe("attn_fwd");
    expect(m.get(copy)).toBe("vectorized_elementwise_kernel<direct_copy_kernel_cuda>");
    expect(m.get(fill)).toBe("vectorized_elementwise_kernel<FillFunctor> #1");
    expect(m.get(fill2)).toBe("vectorized_elementwise_kernel<FillFunctor> #2");
    expect(new Set(m.values()).size).toBe(m.size);
  });
});

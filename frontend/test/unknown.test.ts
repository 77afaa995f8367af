import { describe, expect, it } from "vitest";
import { annotatedUrl, unknownKernels } from "../src/unknown";
import type { Report } from "../src/types";

describe("unknownKernels", () => {
  it("sorts by GPU time and survives missing or broken fields", () => {
    const r = {
      unknown_kernels: [
        { name: "small_attn_kernel", count: 2, gpu_us: 5, share: 0.01, toml: "[[family]]" },
        { name: "zz_custom_attn_fwd_kernel", count: 4, gpu_us: 200, share: 0.9 },
        { name: "", count: 1 },
        { count: 3 },
      ],
    } as unknown as Report;
    const rows = unknownKernels(r);
    expect(rows.map((x) => x.name)).toEqual(["zz_custom_attn_fwd_kernel", "small_attn_kernel"]);
    expect(rows[0]).toMatchObject({ count: 4, us: 200, share: 0.9, toml: "" });
    expect(unknownKernels({} as Report)).toEqual([]);
    expect(unknownKernels(null)).toEqual([]);
  });
});

describe("annotatedUrl", () => {
  it("names the run, worker and span, escaped", () => {
    expect(annotatedUrl({ run: "group/a b", worker: "host_1", span: "17" }))
      .toBe("./annotated?run=group%2Fa+b&worker=host_1&span=17");
    expect(annotatedUrl({ run: "r" })).toBe("./annotated?run=r");
  });
});

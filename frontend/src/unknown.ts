// The safety net's model: kernels named like attention that tb-attn could not place, and the link to
// the run's annotated trace. Pure functions (test/unknown.test.ts).

import { num } from "./format";
import type { Report } from "./types";

export interface UnknownRow {
  name: string;
  count: number;
  us: number;
  share: number;
  toml: string;
}

/** Rows by GPU time, robust to missing fields; names without text are dropped. */
export function unknownKernels(report: Report | null | undefined): UnknownRow[] {
  const rows = Array.isArray(report?.unknown_kernels) ? report!.unknown_kernels! : [];
  return rows
    .filter((r) => r && typeof r.name === "string" && r.name.length > 0)
    .map((r) => ({
      name: r.name as string, count: num(r.count) ?? 0, us: num(r.gpu_us) ?? 0, share: num(r.share) ?? 0,
      toml: typeof r.toml === "string" ? r.toml : "",
    }))
    .sort((a, b) => b.us - a.us);
}

/** The /annotated URL of a run (relative, like every other route of the plugin). */
export function annotatedUrl(t: { run: string; worker?: string | null; span?: string | null }): string {
  const q = new URLSearchParams({ run: t.run });
  if (t.worker) q.set("worker", t.worker);
  if (t.span) q.set("span", t.span);
  return `./annotated?${q.toString()}`;
}

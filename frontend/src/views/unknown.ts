// Summary additions: kernels named like attention that nothing explains (with a TOML row to copy),
// and the download of the run's trace annotated for Perfetto.

import { h } from "../dom";
import { fmtCount, fmtShare, fmtUs } from "../format";
import type { Report } from "../types";
import { annotatedUrl, unknownKernels } from "../unknown";

export function unknownPanel(report: Report): HTMLElement | null {
  const rows = unknownKernels(report);
  if (!rows.length) return null;
  const one = rows.length === 1;
  return h("div", { class: "notice notice-unknown", "data-testid": "unknown-kernels", role: "status" },
    h("div", { class: "notice-title" }, one
      ? "1 kernel name looks like attention but tb-attn could not place it"
      : `${rows.length} kernel names look like attention but tb-attn could not place them`),
    h("div", { class: "notice-detail" },
      (one ? "It matches no kernel family and is in no attention call, so it is not counted as attention. "
        : "They match no kernel family and are in no attention call, so they are not counted as attention. ")
      + "If it is attention, add a [[family]] row like the one below to a TOML file and give it to tb-attn with "
      + "--patterns FILE (TensorBoard: TB_ATTN_PATTERNS=FILE); docs/kernels.md has the details."),
    h("table", { class: "grid" },
      h("thead", null, h("tr", null, h("th", null, "Kernel"), h("th", { class: "num" }, "Count"),
        h("th", { class: "num" }, "GPU time"), h("th", { class: "num" }, "Share"))),
      h("tbody", null, ...rows.map((r) => h("tr", { "data-kernel": r.name },
        h("td", { class: "kname", title: r.name }, r.name),
        h("td", { class: "num" }, fmtCount(r.count)),
        h("td", { class: "num" }, fmtUs(r.us)),
        h("td", { class: "num" }, fmtShare(r.share)))))),
    rows[0].toml ? h("pre", { class: "toml", "data-testid": "unknown-toml" }, rows[0].toml) : null);
}

export function annotatedLink(t: { run: string; worker?: string | null; span?: string | null }): HTMLElement {
  return h("p", { class: "annotated" },
    h("a", { href: annotatedUrl(t), download: "", "data-testid": "annotated-link" }, "Download this trace annotated"),
    " for Perfetto (ui.perfetto.dev) or chrome://tracing: the attention calls and their stages on a track of their own.");
}

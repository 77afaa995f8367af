// Browser test of the safety net and the annotated-trace download in the Attention tab's summary,
// against a real `tensorboard --logdir` started by tests/test_browser_kernels.py (one run whose trace
// has an attention kernel nobody knows). By hand: TB_URL=http://127.0.0.1:6006 RUN=custom node browser/kernels.mjs
import { gunzipSync } from "node:zlib";
import { API, SHOTS, TB, api, ok, openTab, run, shot, watch } from "./harness.mjs";

const RUN = process.env.RUN || "";
if (!TB || !RUN) throw new Error("set TB_URL and RUN");


await run(async (browser) => {
  const R = (await api(`report?run=${encodeURIComponent(RUN)}`)).body;
  ok(Array.isArray(R.unknown_kernels) && R.unknown_kernels.length > 0, "the backend reports unknown attention kernels");
  const page = await browser.newPage();
  watch(page);
  const { frame } = await openTab(page, "#tb_attn&attn_view=summary");  // the tab opens on the Overview; the safety net is the Summary's
  const panel = frame.locator('[data-view="summary"] [data-testid="unknown-kernels"]');
  await panel.waitFor({ timeout: 60000 });
  const first = R.unknown_kernels[0];
  const row = panel.locator("tbody tr").first();
  ok((await row.getAttribute("data-kernel")) === first.name, `the summary lists ${first.name}`);
  ok((await row.locator("td").nth(1).textContent()).replace(/,/g, "") === String(first.count), `with its count ${first.count}`);
  const share = /([\d.]+)%/.exec(await row.locator("td").nth(3).textContent());
  ok(share && Math.abs(Number(share[1]) - first.share * 100) <= 0.05 + 1e-9, "and its share of GPU time");
  ok((await panel.locator('[data-testid="unknown-toml"]').textContent()) === first.toml, "and the backend's [[family]] row to copy");
  const href = await frame.locator('[data-testid="annotated-link"]').getAttribute("href");
  ok(href && href.startsWith("./annotated?run="), `the summary links the annotated trace (${href})`);
  const resp = await fetch(new URL(href, `${API}/`));
  ok(resp.status === 200 && resp.headers.get("content-type") === "application/gzip", "the link downloads a gzip file");
  const doc = JSON.parse(gunzipSync(Buffer.from(await resp.arrayBuffer())).toString("utf8"));
  const track = doc.traceEvents.find((e) => e.ph === "M" && e.name === "process_name" && e.args.name === "tb-attn: attention calls");
  ok(!!track, "the download is the trace with the tb-attn track");
  const calls = doc.traceEvents.filter((e) => e.pid === track.pid && e.cat === "tb_attn.call");
  ok(calls.length >= R.calls, `with a slice per call (${calls.length} for ${R.calls} calls)`);
  if (SHOTS) await panel.scrollIntoViewIfNeeded();
  await shot(page, "unknown_kernels");
});

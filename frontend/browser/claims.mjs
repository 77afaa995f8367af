// Browser test of a claim linked to its kernels in One call (issue 46 item 1) against a real
// `tensorboard --logdir` started by tests/test_browser_reading.py over a real GPU trace. For each check
// (CLAIMS_FILE: call, the claim to click, the correlation ids expected, derived there from the raw
// trace's events), it clicks the claim in the Reading panel and compares the events table's highlighted
// kernels, the panel's highlighted kernel rows and its status line with them; a second click clears.
// By hand: TB_URL=http://127.0.0.1:6006 RUN=owlv2 CLAIMS_FILE=claims.json node browser/claims.mjs
import { readFileSync } from "node:fs";
import { ok, openTab, run, shot, TB, watch } from "./harness.mjs";

const RUN = process.env.RUN || "";
if (!TB || !RUN || !process.env.CLAIMS_FILE) throw new Error("set TB_URL, RUN and CLAIMS_FILE");
const CHECKS = JSON.parse(readFileSync(process.env.CLAIMS_FILE, "utf8"));
const esc = (s) => s.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
const same = (a, b) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

await run(async (browser) => {
  for (const c of CHECKS) {
    const page = await browser.newPage();
    watch(page);
    const { frame } = await openTab(page, `#tb_attn&attn_view=timeline&attn_run=${encodeURIComponent(RUN)}&attn_call=${c.call}`);
    const view = frame.locator('[data-view="timeline"]');
    const panel = view.locator('[data-testid="reading-panel"]');
    await panel.waitFor({ timeout: 60000 });
    const target = c.kind === "extra"
      ? panel.locator(`[data-testid="reading-extra"][data-cause="${c.cause}"]`).first()
      : panel.locator(`[data-testid="reading-kernel"][data-kernel="${esc(c.kernel)}"] [data-testid="reading-zero-claim"]`).first();
    const what = `call #${c.call}, ${c.kind === "extra" ? `extra ${c.cause}` : "the 0% occupancy figure"}`;
    await target.click();
    const hits = view.locator('[data-testid="timeline-event"][data-claim-hit]');
    const got = await hits.evaluateAll((rs) => rs.map((r) => Number(r.getAttribute("data-correlation"))));
    ok(got.length > 0 && same(got, c.expected),
      `${what}: highlights exactly the kernels ${c.expected.join(", ")} (got ${got.join(", ") || "none"})`);
    const kinds = await hits.evaluateAll((rs) => rs.map((r) => r.getAttribute("data-kind")));
    ok(kinds.every((k) => k === "kernel"), `${what}: only kernels are highlighted`);
    const rows = await panel.locator('[data-testid="reading-kernel"][data-claim-hit]')
      .evaluateAll((rs) => rs.map((r) => r.getAttribute("data-kernel")));
    ok(same(rows, c.names), `${what}: the panel marks the ${c.names.length} kernel name(s) they ran`);
    const status = await panel.locator('[data-testid="claim-status"]').textContent();
    ok(status.startsWith(`${c.expected.length} kernel${c.expected.length === 1 ? "" : "s"} of this call highlighted (correlation `),
      `${what}: the status line says so ("${status.slice(0, 60)}…")`);
    ok(await view.locator("details.numbers").evaluate((d) => d.open), `${what}: the events table is opened on them`);
    if (c.shot) await shot(page, c.shot);
    await target.click();
    ok(await hits.count() === 0, `${what}: a second click clears the highlight`);
    await page.close();
  }
});

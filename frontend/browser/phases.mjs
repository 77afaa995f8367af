// Browser test of the Reading panel's serving phases (issue 48) against a real `tensorboard --logdir` started by
// tests/test_browser_reading.py over a built vLLM FA2 serving trace (decode, prefill and mixed calls) and an
// all-decode one. Every figure the phase table shows is compared with the run's /report (its reading row's
// phases), not with /call's answer.
// By hand: TB_URL=http://127.0.0.1:6006 RUN=served ONE_PHASE_RUN=decode_only node browser/phases.mjs
import { api, ok, openTab, run, SHOTS, TB, watch } from "./harness.mjs";
import { join } from "node:path";

const RUN = process.env.RUN || "";
const ONE_PHASE_RUN = process.env.ONE_PHASE_RUN || "";
if (!TB || !RUN || !ONE_PHASE_RUN) throw new Error("set TB_URL, RUN and ONE_PHASE_RUN");

// format.ts's fmtUs and reading_model's perCall, so that what the panel shows can be compared with the report.
function fmtUs(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)} s`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(2)} ms`;
  return `${v.toFixed(1)} µs`;
}
const perCall = (v) => (Number.isInteger(v) ? String(v) : String(Number(v.toFixed(2))));

async function openCall(browser, runName, id) {
  const page = await browser.newPage();
  watch(page);
  const { frame } = await openTab(page, `#tb_attn&attn_view=timeline&attn_run=${encodeURIComponent(runName)}&attn_call=${id}`);
  const panel = frame.locator('[data-view="timeline"] [data-testid="reading-panel"]');
  await panel.waitFor({ timeout: 60000 });
  return { page, panel };
}

await run(async (browser) => {
  const R = (await api(`report?run=${encodeURIComponent(RUN)}`)).body;
  const group = R.reading[0];
  ok(R.reading.length === 1 && group.phases.length >= 2, `${RUN}: one reading row, split into ${group.phases.length} phases`);
  const seen = new Set();
  for (const call of R.call_samples) {
    if (seen.has(call.phase)) continue;
    seen.add(call.phase);
    const { page, panel } = await openCall(browser, RUN, call.id);
    const box = panel.locator('[data-testid="reading-phases"]');
    await box.waitFor({ timeout: 30000 });
    ok(await box.locator('[data-testid="reading-phase"]').getAttribute("data-phase") === call.phase,
      `${RUN} call #${call.id}: the panel names its phase, ${call.phase} (the report's call_samples[].phase)`);
    const rows = box.locator('[data-testid="reading-phase-row"]');
    ok(await rows.count() === group.phases.length, `${RUN} call #${call.id}: one row per phase of the report (${group.phases.length})`);
    for (const [i, p] of group.phases.entries()) {
      const row = rows.nth(i);
      const e = p.expected;
      const attrs = await row.evaluate((r) => ({ phase: r.dataset.phase, calls: r.dataset.calls, expected: r.dataset.expected,
        ran: r.dataset.ran, own: r.hasAttribute("data-own") }));
      ok(attrs.phase === p.phase && attrs.calls === String(p.calls) && attrs.expected === String(e.expected)
        && attrs.ran === String(e.ran) && attrs.own === (p.phase === call.phase),
      `${RUN} call #${call.id}: ${p.phase} · ${p.calls} calls, expected ${e.expected}, ran ${e.ran}${attrs.own ? " (this call's)" : ""}`);
      const causes = await row.locator('[data-testid="reading-phase-extra"]').evaluateAll((xs) => xs.map((x) => x.getAttribute("data-cause")));
      ok(JSON.stringify(causes) === JSON.stringify(e.extras.map((x) => x.cause)), `${RUN} ${p.phase}: extras ${causes.join(", ") || "none"}`);
      for (const x of e.extras) {
        const t = await row.locator(`[data-testid="reading-phase-extra"][data-cause="${x.cause}"]`).textContent();
        ok(t.startsWith(`+${perCall(x.per_call)} ${x.cause.replace(/_/g, " ")}`) && t.includes(`${fmtUs(x.us_per_call)} per call`),
          `${RUN} ${p.phase}: ${x.cause} +${perCall(x.per_call)} per call, ${fmtUs(x.us_per_call)} per call`);
      }
      const text = await row.textContent();
      ok(text.includes(`${fmtUs(p.host.host_us_per_call)} on the host vs ${fmtUs(p.host.gpu_us_per_call)} on the GPU per call`),
        `${RUN} ${p.phase}: host ${fmtUs(p.host.host_us_per_call)} vs GPU ${fmtUs(p.host.gpu_us_per_call)} per call`);
    }
    if (SHOTS && call.phase === "decode") {
      await page.setViewportSize({ width: 1400, height: 1000 });
      await panel.scrollIntoViewIfNeeded();
      await panel.screenshot({ path: join(SHOTS, "reading_phases.png") });
      console.log("screenshot reading_phases.png");
    }
    await page.close();
  }
  ok(seen.size === group.phases.length, `${RUN}: a call of every phase opened (${[...seen].join(", ")})`);
  // one phase: the reading is not split, and the panel shows no phase table
  const one = (await api(`report?run=${encodeURIComponent(ONE_PHASE_RUN)}`)).body;
  ok(one.reading.every((g) => !g.phases), `${ONE_PHASE_RUN}: the report does not split its reading`);
  const { panel } = await openCall(browser, ONE_PHASE_RUN, one.call_samples[0].id);
  await panel.locator('[data-testid="reading-expected"]').waitFor({ timeout: 30000 });
  ok(await panel.locator('[data-testid="reading-phases"]').count() === 0, `${ONE_PHASE_RUN}: no phase table where nothing is split`);
  console.log("the phase table shows the report's per-phase reading");
});

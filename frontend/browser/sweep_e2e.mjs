// Browser test of the Sweep view against a real `tensorboard --logdir` over a real CPU sweep
// (started by tests/test_browser_sweep.py): every number read on screen is compared with the
// backend's /sweep answer from the same server; a cell's profile link opens that run's Summary.
//   TB_URL=http://127.0.0.1:6006 SWEEP_RUN=cpu_sweep node browser/sweep_e2e.mjs
import { TB, api, checkLegends, ok, openTab, run, shot, watch } from "./harness.mjs";

const RUN = process.env.SWEEP_RUN || "";
if (!TB || !RUN) throw new Error("set TB_URL and SWEEP_RUN");

/** "1.50 ms" -> seconds, with the rounding the display allows. */
function parseSeconds(text) {
  const m = /([\d.]+)\s*(µs|ms|s)\b/.exec(text || "");
  if (!m) return null;
  const mult = { "µs": 1e-6, ms: 1e-3, s: 1 }[m[2]];
  const decimals = (m[1].split(".")[1] || "").length;
  return { v: Number(m[1]) * mult, tol: 0.5 * 10 ** -decimals * mult + 1e-12 };
}

await run(async (browser) => {

  const page = await browser.newPage();
  watch(page);

  const sweeps = (await api("sweeps")).body;
  ok(sweeps.sweeps.some((s) => s.run === RUN), `backend lists the sweep ${RUN}`);
  const doc = (await api(`sweep?run=${encodeURIComponent(RUN)}`)).body;
  ok(doc.cells.length > 0, `the sweep has ${doc.cells.length} cells`);

  const { frame } = await openTab(page, `#tb_attn&attn_view=sweep&attn_sweep=${encodeURIComponent(RUN)}`);
  const view = frame.locator('[data-view="sweep"]');
  await view.locator('[data-testid="sweep-cells"]').waitFor({ timeout: 90000 });
  ok(await frame.locator('[data-testid="sweep-select"]').inputValue() === RUN, "the sweep picker shows the run from the URL");

  for (const [status, n] of Object.entries(doc.analysis.status_counts)) {
    const t = await view.locator(`[data-status-count="${status}"] .fact-v`).textContent();
    ok(t === String(n), `${n} ${status} cells shown`);
  }
  const rows = view.locator('[data-testid="sweep-cells"] tbody tr');
  ok(await rows.count() === doc.cells.length, "one table row per cell");
  for (const c of doc.cells) {
    const row = view.locator(`[data-testid="sweep-cells"] tbody tr[data-cell="${c.cell_id}"]`);
    ok(await row.getAttribute("data-status") === c.status, `${c.cell_id}: status ${c.status}`);
    if (c.status === "ok") {
      const p = parseSeconds(await row.locator("td").nth(4).textContent());
      ok(p && Math.abs(p.v - c.median_s) <= p.tol, `${c.cell_id}: median ${c.median_s} s on screen`);
    }
  }
  for (const b of doc.analysis.best) {
    const td = view.locator(`[data-testid="sweep-best"] td[data-batch="${b.batch}"][data-seq-len="${b.seq_len}"]`);
    ok(await td.getAttribute("data-best") === (b.backend || ""), `best at B=${b.batch} L=${b.seq_len}: ${b.backend || "none"}`);
  }
  const oomRows = await view.locator('[data-testid="sweep-oom"] tbody tr').count();
  ok(oomRows === doc.analysis.oom_boundary.length && oomRows > 0, `OOM boundary: ${oomRows} rows`);
  const firstBatch = Math.min(...doc.cells.map((c) => c.batch));
  const mathFit = doc.analysis.fits.find((f) => f.backend === "math" && f.batch === firstBatch);
  const expText = await view.locator('[data-testid="sweep-exponents"] [data-backend="math"]').textContent();
  ok(expText.includes(`L^${mathFit.time_exponent.toFixed(2)}`), `math's fitted time exponent shown: ${expText}`);
  ok(await view.locator('[data-chart="sweep-time"] canvas').count() > 0, "time chart drawn");
  ok(await view.locator('[data-chart="sweep-memory"] canvas').count() > 0, "memory chart drawn");
  ok((await view.locator('[data-testid="sweep-conventions"]').textContent()).includes("4*B*H*Lq*Lk*D"), "FLOP convention stated");

  await checkLegends(view, "sweep");
  await shot(page, "sweep");

  // Another batch: the charts and exponents follow.
  const other = Math.max(...doc.cells.map((c) => c.batch));
  await view.locator(`[data-toggle="sweep-batch"] button[data-value="${other}"]`).click();
  const fit4 = doc.analysis.fits.find((f) => f.backend === "math" && f.batch === other);
  const exp4 = await view.locator('[data-testid="sweep-exponents"] [data-backend="math"]').textContent();
  ok(exp4.includes(`L^${fit4.time_exponent.toFixed(2)}`), `batch ${other}: math's exponent ${exp4}`);

  // A cell's profile opens in the Summary view.
  const linked = doc.cells.find((c) => c.profile_run);
  ok(!!linked, `a cell links to its profile run ${linked && linked.profile_run}`);
  await view.locator(`button[data-profile="${linked.profile_run}"]`).first().click();
  await frame.locator('[data-view="summary"]').waitFor({ timeout: 90000 });
  ok(await frame.locator('[data-testid="run-select"]').inputValue() === linked.profile_run, "the profile run is selected");
  await frame.locator('[data-view="summary"] [data-card="calls"]').waitFor({ timeout: 90000 });
  const calls = await frame.locator('[data-view="summary"] [data-card="calls"] .card-value').textContent();
  ok(Number(calls.replace(/,/g, "")) >= 1, `the profile has attention calls (${calls})`);

  await page.waitForTimeout(300);
}, { height: 1300 });

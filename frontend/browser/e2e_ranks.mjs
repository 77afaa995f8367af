// Browser test of the Ranks view against a real `tensorboard --logdir` (started by
// tests/test_browser_ranks.py): the heatmap shows every rank of the job with the backend's numbers,
// names the slowest rank and the rank on another backend, compares rank against rank, and a click
// on a rank opens that rank's report. Fails on any console error.
//   TB_URL=http://127.0.0.1:6006 JOB=job node browser/e2e_ranks.mjs
import { TB, api, ok, openTab, run, shot, watch } from "./harness.mjs";

const JOB = process.env.JOB || "job";
if (!TB) throw new Error("set TB_URL");



await run(async (browser) => {

  const page = await browser.newPage();
  watch(page);

  const ranks = (await api(`ranks?run=${encodeURIComponent(JOB)}`)).body;
  ok(Array.isArray(ranks.ranks) && ranks.ranks.length >= 2, `backend summarises ${ranks.ranks.length} ranks of ${JOB}`);

  const { frame } = await openTab(page, `#tb_attn&attn_view=ranks&attn_run=${encodeURIComponent(JOB)}`);
  const heat = frame.locator('[data-testid="ranks-heatmap"]');
  await heat.waitFor({ timeout: 120000 });
  ok(await frame.locator('.attn-tabs [data-tab="ranks"]').getAttribute("aria-selected") === "true", "the Ranks tab is selected");
  const rows = heat.locator("tbody tr");
  ok(await rows.count() === ranks.ranks.length, "the heatmap has one row per rank");
  ok(await heat.locator("thead th").count() === 4 + ranks.stages.length, "one column per stage");
  const headline = await frame.locator('[data-testid="ranks-headline"] .headline').first().textContent();
  ok(headline === ranks.headline, `the headline is the backend's: ${headline}`);
  for (const r of ranks.ranks) {
    const row = heat.locator(`tr[data-rank="${r.rank}"]`);
    for (const st of ranks.stages) {
      const us = Number(await row.locator(`td.heat[data-stage="${st}"]`).getAttribute("data-us"));
      ok(Math.abs(us - (r.stages[st] || 0)) < 1e-6, `rank ${r.rank} ${st}: ${us} µs as in /ranks`);
    }
  }
  const slowRow = heat.locator(`tr[data-rank="${ranks.slowest.rank}"]`);
  ok((await slowRow.getAttribute("class")).includes("slowest"), `rank ${ranks.slowest.rank} is marked slowest`);
  const maxBg = await slowRow.locator("td.heat").first().evaluate((el) => getComputedStyle(el).backgroundColor);
  ok(maxBg !== "rgb(255, 255, 255)" && maxBg !== "rgba(0, 0, 0, 0)", `the slowest rank's cell is coloured (${maxBg})`);
  for (const o of ranks.odd_ranks) {
    const texts = await frame.locator('[data-testid="ranks-odd"]').allTextContents();
    ok(texts.some((t) => t.includes(`rank ${o.rank} runs ${o.what} ${o.value}`)), `rank ${o.rank}'s other ${o.what} is named`);
  }
  const leftOut = await frame.locator('[data-testid="ranks-left-out"]').allTextContents();
  for (const w of ranks.unranked_workers || []) {
    ok(leftOut.some((t) => t.startsWith("without a rank, left out") && t.includes(w)), `the trace without a rank (${w}) is named as left out`);
  }
  const cmpTable = frame.locator('[data-testid="rank-compare-stages"]');
  await cmpTable.waitFor({ timeout: 60000 });
  ok(await cmpTable.locator("tbody tr").count() > 0, "rank against rank shows stage deltas");
  const headCells = await cmpTable.locator("thead th").allTextContents();
  ok(headCells[2] === `rank ${ranks.slowest.rank}`, `rank against rank compares with the slowest rank by default (${headCells.join(" | ")})`);

  await shot(page, "ranks");

  await slowRow.click();
  await frame.locator('[data-view="summary"]').waitFor({ timeout: 60000 });
  ok(await frame.locator('[data-testid="worker-select"]').inputValue() === ranks.slowest.worker,
    `a click on rank ${ranks.slowest.rank} opens its report (${ranks.slowest.worker})`);
  const sub = await frame.locator('[data-view="summary"] h2 .sub').textContent();
  ok(sub.includes(ranks.slowest.worker), "the summary names that rank's worker");

  await page.waitForTimeout(300);
});

// Browser test of the Roofline view and of Compare's decomposition, against a real `tensorboard
// --logdir` (started by tests/test_browser_roofline.py): what the page shows is compared with the
// backend's JSON from the same server; a point is hovered for its numbers; no console errors.
//   TB_URL=http://127.0.0.1:6006 RUNS_JSON='{"roofline":..,"a":..,"b":..}' node browser/roofline.mjs
import { TB, api, checkLegends, ok, openTab, run, shot, watch } from "./harness.mjs";

const RUNS = JSON.parse(process.env.RUNS_JSON || "{}");
if (!TB || !RUNS.roofline || !RUNS.a || !RUNS.b) throw new Error("set TB_URL and RUNS_JSON {roofline, a, b}");

function usOf(text) {
  const m = /(\+|\u2212|-)?([\d.]+)\s*(µs|ms|s)\b/.exec(text || "");
  if (!m) return null;
  const mult = { "µs": 1, ms: 1e3, s: 1e6 }[m[3]];
  const dec = (m[2].split(".")[1] || "").length;
  return { v: Number(m[2]) * mult * (m[1] === "-" || m[1] === "\u2212" ? -1 : 1), tol: 0.5 * 10 ** -dec * mult + 1e-6 };
}
function sameUs(text, us, what) {
  const p = usOf(text);
  ok(p && Math.abs(p.v - us) <= p.tol, `${what}: shows "${text}" for ${us} µs`);
}
await run(async (browser) => {
  const page = await browser.newPage();
  watch(page);
  const open = async (hash) => (await openTab(page, hash)).frame;

  // ---- The Roofline view of one run ---------------------------------------------------------
  const R = (await api(`report?run=${encodeURIComponent(RUNS.roofline)}`)).body;
  const rf = R.roofline;
  let frame = await open(`#tb_attn&attn_view=roofline&attn_run=${encodeURIComponent(RUNS.roofline)}`);
  const view = frame.locator('[data-view="roofline"]');
  const chart = view.locator('[data-chart="roofline"]');
  await chart.locator("canvas").first().waitFor({ timeout: 60000 });
  ok(await frame.locator('.attn-tabs [data-tab="roofline"]').getAttribute("aria-selected") === "true", "the Roofline tab is selected");
  const pts = rf.layers.filter((l) => l.intensity > 0 && l.achieved_tflops > 0).length;
  ok(Number(await chart.getAttribute("data-points")) === pts, `one point per layer type, implementation and length class (${pts})`);
  ok(Number(await chart.getAttribute("data-roofs")) === (rf.roof ? 1 : 0), "the device roof is drawn");
  const roofText = await view.locator('[data-testid="roofline-roof"]').textContent();
  ok(rf.roof && roofText.includes(rf.roof.source) && roofText.startsWith(rf.roof.kind === "measured" ? "Measured" : "Data-sheet"),
    `the roof says where it comes from: ${roofText}`);
  if (rf.roof.kind === "measured") {
    ok(roofText.includes(rf.roof.measured_at ? `measured ${rf.roof.measured_at}` : "when measured: not recorded")
      && roofText.includes(`Re-measure: ${rf.roof.remeasure}`), `a measured roof says when, and how to re-measure: ${roofText}`);
  }
  const rows = view.locator('[data-testid="roofline-table"] tbody tr[data-layer-type]');
  ok(await rows.count() === rf.layers.length, `the table has the ${rf.layers.length} layer rows`);
  for (const [i, l] of rf.layers.entries()) {
    const row = rows.nth(i);
    ok((await row.getAttribute("data-bound")) === (l.bound || ""), `${l.layer_type}: ${l.bound}-bound`);
    ok((await row.locator('[data-testid="roofline-line"]').textContent()) === l.line, `line: ${l.line}`);
    sameUs(await row.locator("td").nth(7).textContent(), l.time_us, `${l.layer_type} time`);
    const lengths = row.locator('[data-testid="roofline-lengths"]');
    ok(l.lengths_text ? (await lengths.textContent()).trim() === l.lengths_text : (await lengths.count()) === 0,
      `${l.label}: its lengths shown where the layer type has several classes`);
  }
  // Hover the first point: the tooltip gives its numbers.
  const top = rf.layers.find((l) => l.intensity > 0 && l.achieved_tflops > 0);
  const box = await chart.boundingBox();
  const [x0, x1] = (await chart.getAttribute("data-x-range")).split(",").map(Number);
  const [y0, y1] = (await chart.getAttribute("data-y-range")).split(",").map(Number);
  const [gl, gr, gt, gb] = (await chart.getAttribute("data-grid")).split(",").map(Number);
  const fx = (Math.log10(top.intensity) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0));
  const fy = (Math.log10(top.achieved_tflops) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0));
  const px = box.x + gl + fx * (box.width - gl - gr);
  const py = box.y + gt + (1 - fy) * (box.height - gt - gb);
  let tipText = "";
  for (let attempt = 0; attempt < 5 && !tipText.includes("FLOP/B"); attempt++) {
    await page.mouse.move(px - 3 + attempt, py);
    await page.mouse.move(px, py);
    await page.waitForTimeout(300);
    const tips = frame.locator(".attn-tip");
    if (await tips.count()) tipText = (await tips.last().textContent()) || "";
  }
  ok(tipText.includes(top.label) && tipText.includes("FLOP/B") && /FLOP\/s/.test(tipText),
    `hovering the point shows its numbers: ${tipText.slice(0, 140)}`);
  await page.mouse.move(box.x + 5, box.y + 5);
  // Per stage: one point per stage with work.
  await view.locator('[data-toggle="roofline-points"] [data-value="all"]').click();
  const stageChart = frame.locator('[data-view="roofline"] [data-chart="roofline"]');
  await stageChart.locator("canvas").first().waitFor();
  const stagePts = rf.layers.flatMap((l) => l.stages).filter((s) => s.intensity > 0 && s.achieved_tflops > 0).length;
  ok(Number(await stageChart.getAttribute("data-points")) === stagePts, `per stage: ${stagePts} points`);
  await checkLegends(frame.locator('[data-view="roofline"]'), "roofline");
  await shot(page, "roofline");
  await frame.locator('[data-view="roofline"] [data-toggle="roofline-points"] [data-value="layers"]').click();

  // ---- Compare: the decomposition and both runs on one chart ----------------------------------------
  const C = (await api(`compare?run=${encodeURIComponent(RUNS.a)}&run=${encodeURIComponent(RUNS.b)}`)).body;
  const D = C.decomposition;
  ok(D && Math.abs(Object.values(D.parts_us).reduce((a, b) => a + b, 0) - D.measured_us) < 1e-6, "the backend's parts sum to the measured difference");
  frame = await open(`#tb_attn&attn_view=compare&attn_compare=${encodeURIComponent(RUNS.a)},${encodeURIComponent(RUNS.b)}`);
  const dec = frame.locator('[data-view="compare"] [data-testid="compare-decomposition"]');
  await dec.locator('[data-testid="decomposition-table"]').waitFor({ timeout: 60000 });
  ok((await dec.locator('[data-testid="decomposition-sentence"]').textContent()) === D.sentence, `sentence: ${D.sentence}`);
  for (const part of ["memory", "compute", "launch", "cpu", "rest"]) {
    sameUs(await dec.locator(`tr[data-part="${part}"] td`).nth(1).textContent(), D.parts_us[part], `decomposition ${part}`);
  }
  sameUs(await dec.locator('tr[data-part="measured"] td').nth(1).textContent(), D.measured_us, "measured difference");
  const both = dec.locator('[data-chart="roofline-compare"]');
  await both.locator("canvas").first().waitFor({ timeout: 60000 });
  const ra = (await api(`report?run=${encodeURIComponent(RUNS.a)}`)).body;
  const rb = (await api(`report?run=${encodeURIComponent(RUNS.b)}`)).body;
  const n = [ra, rb].map((r) => r.roofline.layers.filter((l) => l.intensity > 0 && l.achieved_tflops > 0).length);
  ok(Number(await both.getAttribute("data-points")) === n[0] + n[1], `both runs on one chart: ${n[0]} + ${n[1]} points`);
  const roofKeys = new Set([ra, rb].filter((r) => r.roofline.roof).map((r) => JSON.stringify([r.roofline.roof.device, r.roofline.roof.bandwidth_tbs, r.roofline.roof.tflops])));
  ok(Number(await both.getAttribute("data-roofs")) === roofKeys.size, `each device's roof drawn once (${roofKeys.size})`);
  await dec.scrollIntoViewIfNeeded();
  await checkLegends(frame.locator('[data-view="compare"]'), "compare with roofline");
  await shot(page, "roofline_compare");

});

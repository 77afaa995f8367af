// Browser test of the Memory view against a real `tensorboard --logdir` over the demo's runs
// (started by tests/test_browser_memory.py): what the view shows is checked against the backend's
// /memory JSON from the same server; Compare overlays two runs' curves; Scaling shows memory
// against sequence length with its exponent; a run without memory says how to record it.
//   TB_URL=http://127.0.0.1:6006 RUNS_JSON='{"eager":[...],"sdpa":[...],"nomem":".."}' node browser/memory_e2e.mjs
import { TB, api, checkLegends, ok, openTab, run, shot, watch } from "./harness.mjs";

const RUNS = JSON.parse(process.env.RUNS_JSON || "{}");
if (!TB || !RUNS.eager?.length || !RUNS.sdpa?.length || !RUNS.nomem) throw new Error("set TB_URL and RUNS_JSON {eager, sdpa, nomem}");

const units = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };
function sameBytes(text, bytes, what) {
  const m = /([\d.]+)\s*(B|KiB|MiB|GiB)\b/.exec(text || "");
  const v = m ? Number(m[1]) * units[m[2]] : NaN;
  const tol = m ? 0.05 * units[m[2]] + 1e-9 : 0;
  ok(m && Math.abs(v - bytes) <= tol, `${what}: shows "${text}" for ${bytes} B`);
}

await run(async (browser) => {
  const page = await browser.newPage();
  watch(page);
  const eager = RUNS.eager[RUNS.eager.length - 1];
  const sdpa = RUNS.sdpa[RUNS.sdpa.length - 1];
  const M = (await api(`memory?run=${encodeURIComponent(eager)}&points=1500`)).body.memory;
  ok(M && M.score_matrix.blocks > 0, `backend: ${eager} has ${M.score_matrix.blocks} score-matrix blocks`);

  // ---- the Memory view of the longest eager run --------------------------------------------------
  const { frame } = await openTab(page, `#tb_attn&attn_view=memory&attn_run=${encodeURIComponent(eager)}`);
  const view = frame.locator('[data-view="memory"]');
  const expl = view.locator('[data-testid="memory-explanation"]');
  await expl.waitFor({ timeout: 120000 });
  const said = await expl.textContent();
  ok(said.toLowerCase() === M.peak.explanation.toLowerCase(), `the peak is explained: "${said}"`);
  ok(/score-matrix block/.test(said), "the explanation names the live score matrices");
  sameBytes(said, M.peak_bytes, "peak in the sentence");
  await view.locator('[data-chart="memory"] canvas').first().waitFor();
  const rows = await view.locator('[data-testid="memory-layers"] tbody tr').all();
  ok(rows.length === M.layers.length, `layer table has ${rows.length} rows`);
  for (const row of rows) {
    const name = await row.getAttribute("data-layer");
    const L = M.layers.find((l) => l.layer === name);
    sameBytes(await row.locator("td").nth(2).textContent(), L.peak_growth_bytes, `peak growth of ${name}`);
    ok(Number(await row.locator("td").nth(6).getAttribute("data-blocks")) === L.score_matrix_blocks, `score blocks of ${name}`);
  }
  const live = await view.locator('[data-testid="memory-live"] tbody tr').count();
  ok(live === M.peak.live.length, `live-at-peak table has ${live} rows`);
  const churn = await view.locator('[data-testid="memory-churn"]').textContent();
  ok(churn.includes(`${M.churn.allocs} allocations`), `churn: ${churn}`);
  await checkLegends(view, "memory");
  await shot(page, "memory");

  // ---- a run without memory events says how to record them ----------------------------------------
  await frame.locator('[data-testid="run-select"]').selectOption(RUNS.nomem);
  const none = frame.locator('[data-view="memory"] [data-testid="memory-none"]');
  await none.waitFor({ timeout: 60000 });
  ok((await none.textContent()).includes("profile_memory=True"), "a trace without memory names profile_memory=True");

  // ---- a CUDA snapshot on its own: the Memory view shows it, the other views say what it is -------
  const snapMem = (await api(`memory?run=${encodeURIComponent(RUNS.snapshot)}&points=1500`)).body.memory;
  ok(snapMem && snapMem.source === "snapshot", `backend: ${RUNS.snapshot} is a snapshot's memory`);
  await frame.locator('[data-testid="run-select"]').selectOption(RUNS.snapshot);
  const sExpl = frame.locator('[data-view="memory"] [data-testid="memory-explanation"]');
  await sExpl.waitFor({ timeout: 60000 });
  ok(Number(await sExpl.getAttribute("data-peak-bytes")) === snapMem.peak_bytes, `the snapshot's peak: ${await sExpl.textContent()}`);
  await frame.locator('.attn-tabs [data-tab="summary"]').click();
  const only = frame.locator('[data-testid="snapshot-only"]');
  await only.waitFor({ timeout: 60000 });
  ok((await only.textContent()).includes("is a CUDA memory snapshot, not a trace"), "the Summary says the run is a snapshot");
  await only.locator("button").click();
  await sExpl.waitFor({ timeout: 60000 });
  ok(await frame.locator('.attn-tabs [data-tab="memory"]').getAttribute("aria-selected") === "true", "its button opens the Memory view");

  // ---- a snapshot recorded without tb-attn: attention found by its stack frames, by layer and stage --
  if (RUNS.framed) {
    const fMem = (await api(`memory?run=${encodeURIComponent(RUNS.framed)}&points=1500`)).body.memory;
    ok(fMem && fMem.attribution && fMem.attribution.by === "frames", `backend: ${RUNS.framed} is attributed by frames`);
    await frame.locator('.attn-tabs [data-tab="memory"]').click();
    await frame.locator('[data-testid="run-select"]').selectOption(RUNS.framed);
    const how = frame.locator('[data-view="memory"] [data-testid="memory-attribution"]');
    await how.waitFor({ timeout: 60000 });
    ok((await how.getAttribute("data-by")) === "frames" && (await how.textContent()).includes(fMem.attribution.sites[0]),
      `the view says how attention was found: ${await how.textContent()}`);
    const stagesCell = frame.locator(`[data-view="memory"] [data-testid="memory-layers"] tr[data-layer="${fMem.layers[0].layer}"] [data-testid="layer-stages"]`);
    ok((await stagesCell.textContent()).includes("(bwd)"), `the layer's stages, backward included: ${await stagesCell.textContent()}`);
  }

  // ---- Compare overlays the two runs' curves ------------------------------------------------------
  await frame.locator('.attn-tabs [data-tab="compare"]').click();
  // A run without memory between the two: the overlay leaves it out, and every run keeps its colour (checkLegends).
  for (const r of [eager, RUNS.nomem, sdpa]) await frame.locator(`[data-view="compare"] input[data-run="${r}"]`).check();
  ok(await frame.locator(`[data-view="compare"] input[data-run="${RUNS.snapshot}"]`).count() === 0,
    "the snapshot run is not offered for comparison (it has no attention)");
  const peaks = frame.locator('[data-view="compare"] [data-testid="compare-memory-peaks"]');
  await peaks.waitFor({ timeout: 120000 });
  await frame.locator('[data-view="compare"] [data-chart="compare-memory"] canvas').first().waitFor();
  const S = (await api(`memory?run=${encodeURIComponent(sdpa)}`)).body.memory;
  const text = await peaks.textContent();
  ok(text.includes(eager) && text.includes(sdpa) && text.includes(`no memory recorded in ${RUNS.nomem}`),
    `overlay names the runs with memory and the one without: ${text}`);
  ok(S.score_matrix.bytes_total === 0 && text.includes(`${sdpa}: peak`) && /score matrices 0 B/.test(text), "SDPA has no score matrix");
  await frame.locator('[data-view="compare"] [data-chart="compare-memory"]').scrollIntoViewIfNeeded();
  await checkLegends(frame.locator('[data-view="compare"]'), "compare with memory");
  await shot(page, "memory_compare");

  // ---- Scaling: memory against sequence length, with the fitted exponent --------------------------
  await frame.locator('[data-view="compare"] input[data-run="' + eager + '"]').uncheck();
  await frame.locator('[data-view="compare"] input[data-run="' + sdpa + '"]').uncheck();
  await frame.locator('[data-view="compare"] input[data-run="' + RUNS.nomem + '"]').uncheck();
  for (const r of [...RUNS.eager, ...RUNS.sdpa]) await frame.locator(`[data-view="compare"] input[data-run="${r}"]`).check();
  await frame.locator('.attn-tabs [data-tab="scaling"]').click();
  const ex = frame.locator('[data-view="scaling"] [data-testid="scaling-memory-exponents"]');
  await ex.waitFor({ timeout: 180000 });
  await frame.locator('[data-view="scaling"] [data-chart="scaling-peak-memory"] canvas').first().waitFor();
  const exps = {};
  for (const li of await ex.locator("li").all()) {
    const m = /L\^([\d.]+)/.exec(await li.textContent());
    exps[await li.getAttribute("data-impl")] = m ? Number(m[1]) : null;
  }
  ok(exps.eager > 1.7 && exps.eager < 2.3, `eager memory grows as L^${exps.eager} (about 2)`);
  const fused = Object.entries(exps).find(([k]) => k !== "eager");
  ok(fused && fused[1] > 0.7 && fused[1] < 1.4, `fused memory grows as L^${fused?.[1]} (about 1)`);
  await checkLegends(frame.locator('[data-view="scaling"]'), "scaling with memory");

  await page.waitForTimeout(300);
}, { height: 1100 });

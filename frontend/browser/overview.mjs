// Browser test of the Overview view (attention in its step), against a real `tensorboard --logdir`
// (started by tests/test_browser_overview.py): the tab opens on it, and what it shows (the limit
// sentence, the step bar and its parts, idle, the host, the per-step spread) is compared with the
// backend's JSON from the same server; no console errors.
//   TB_URL=http://127.0.0.1:6006 RUNS_JSON='{"cpu": "...", "owl": "...", "nccl": "..."}' node browser/overview.mjs
import { TB, api, ok, openTab, run, shot, watch } from "./harness.mjs";

const RUNS = JSON.parse(process.env.RUNS_JSON || "{}");
if (!TB || !RUNS.cpu) throw new Error("set TB_URL and RUNS_JSON {cpu, owl?, nccl?}");

function usOf(text) {
  const m = /(\+|\u2212|-)?([\d.]+)\s*(µs|ms|s)\b/.exec(text || "");
  if (!m) return null;
  const mult = { "µs": 1, ms: 1e3, s: 1e6 }[m[3]];
  const dec = (m[2].split(".")[1] || "").length;
  return { v: Number(m[2]) * mult, tol: 0.5 * 10 ** -dec * mult + 1e-6 };
}
function sameUs(text, us, what) {
  const p = usOf(text);
  ok(p && Math.abs(p.v - us) <= p.tol, `${what}: shows "${text}" for ${us} µs`);
}
function samePct(text, share, what) {
  const m = /([\d.]+)%/.exec(text || "");
  ok(m && Math.abs(Number(m[1]) - share * 100) <= 0.05 + 1e-9, `${what}: shows "${text}" for ${share}`);
}

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  watch(page);
  for (const [key, runName] of Object.entries(RUNS)) {
    const R = (await api(`report?run=${encodeURIComponent(runName)}`)).body;
    const O = R.overview;
    // no view in the URL: the tab opens on the Overview
    const { frame } = await openTab(page, `#tb_attn&attn_run=${encodeURIComponent(runName)}`);
    const view = frame.locator('[data-view="overview"]');
    await view.waitFor({ timeout: 60000 });
    ok(await frame.locator('.attn-tabs [data-tab="overview"]').getAttribute("aria-selected") === "true", `${key}: the Overview tab opens first`);
    ok((await view.locator('[data-testid="limit"]').textContent()) === O.limit.sentence, `${key}: the limit sentence: ${O.limit.sentence}`);
    ok((await view.locator('[data-testid="limit"]').getAttribute("data-kind")) === O.limit.kind, `${key}: limit kind ${O.limit.kind}`);
    const T = O.total;
    const host = await view.locator('[data-testid="host-line"]').textContent();
    if (T.data_loading_us) sameUs(host.split("data loading ")[1], T.data_loading_us, `${key}: data loading on the host`);
    if (T.optimizer_us) sameUs(host.split("optimizer ")[1], T.optimizer_us, `${key}: optimizer on the host`);
    if (T.gpu_span_us === null) {
      ok(await view.locator('[data-testid="step-bar"]').count() === 0, `${key}: no GPU activity, no step bar invented`);
      await shot(page, `overview_${key}`);
      continue;
    }
    sameUs(await view.locator('[data-card="span"] .card-value').textContent(), T.gpu_span_us, `${key}: GPU span`);
    sameUs(await view.locator('[data-card="busy"] .card-value').textContent(), T.busy_us, `${key}: GPU busy`);
    const parts = T.parts.filter((p) => p.us > 0);
    const segs = view.locator('[data-testid="step-bar"] .step-seg');
    ok(JSON.stringify(await segs.evaluateAll((s) => s.map((x) => x.getAttribute("data-part")))) === JSON.stringify(parts.map((p) => p.part)),
      `${key}: the bar's parts in precedence order: ${parts.map((p) => p.part).join(", ")}`);
    const span = T.parts.reduce((a, p) => a + p.us, 0);
    const widths = await segs.evaluateAll((s) => s.map((x) => parseFloat(x.style.width)));
    for (const [i, p] of parts.entries()) ok(Math.abs(widths[i] - 100 * p.us / span) < 0.01, `${key}: ${p.part} is ${widths[i]}% of the bar`);
    const rows = view.locator('[data-testid="step-parts"] tbody tr');
    ok(await rows.count() === parts.length, `${key}: one row per part with time`);
    for (const [i, p] of parts.entries()) {
      sameUs(await rows.nth(i).locator("td").nth(1).textContent(), p.us, `${key}: ${p.part} time`);
      samePct(await rows.nth(i).locator("td").nth(2).textContent(), p.us / span, `${key}: ${p.part} share`);
    }
    const note = async (k) => view.locator(`[data-testid="step-notes"] [data-note="${k}"]`).textContent();
    if (T.idle_host_us !== null) {
      const idle = await note("idle");
      sameUs(idle.split("waiting on the host ")[1], T.idle_host_us, `${key}: idle waiting on the host`);
      sameUs(idle.split("on a synchronisation ")[1], T.idle_sync_us, `${key}: idle waiting on a synchronisation`);
      if (T.idle_kernel_us) sameUs(idle.split("work already issued) ")[1], T.idle_kernel_us, `${key}: idle kernel wait`);
    }
    if (T.communication_us) {
      const comm = await note("communication");
      sameUs(comm.split("communication ")[1], T.communication_us, `${key}: communication`);
      sameUs(comm.split(": ")[1], T.communication_exposed_us, `${key}: exposed communication`);
    }
    if (O.steps.length > 1) {
      const table = view.locator('[data-testid="step-spread"]');
      ok(await table.locator("tbody tr[data-step]").count() === O.steps.length, `${key}: one row per step`);
      const idle = O.spread.find((s) => s.figure === "idle_us");
      for (const k of ["min", "median", "max"]) {
        sameUs(await table.locator(`tr[data-spread="${k}"] td`).nth(3).textContent(), idle[`${k}_us`], `${key}: ${k} idle across steps`);
      }
    }
    const phases = O.phases.filter((p) => p.phase !== "unknown");
    if (phases.length) {  // serving phases: one row per phase, its roofline as the JSON says
      for (const p of O.phases) {
        const row = view.locator(`[data-testid="phases"] tr[data-phase="${p.phase}"]`);
        ok(await row.count() === 1, `${key}: a row for phase ${p.phase}`);
        ok((await row.locator("td").nth(1).textContent()) === String(p.calls), `${key}: ${p.phase} calls`);
        const roof = await row.locator('[data-testid="phase-roofline"]').textContent();
        if (!p.roofline) ok(roof === "no shapes recorded", `${key}: ${p.phase} has no roofline point`);
        else {
          ok(roof.startsWith(`${p.roofline.bound}-bound: ${p.roofline.bytes_are === "kv_cache_read" ? "KV cache read" : "bytes"} `),
            `${key}: ${p.phase} roofline "${roof}"`);
        }
      }
    }
    await shot(page, key === "owl" ? "overview" : `overview_${key}`);
  }

  // ---- Compare: the step's deltas beside attention's -------------------------------------------
  const [a, b] = [RUNS.cpu, RUNS.owl ?? RUNS.nccl ?? null];
  if (b) {
    const C = (await api(`compare?run=${encodeURIComponent(a)}&run=${encodeURIComponent(b)}`)).body;
    const { frame } = await openTab(page, `#tb_attn&attn_view=compare&attn_compare=${encodeURIComponent(a)},${encodeURIComponent(b)}`);
    const box = frame.locator('[data-view="compare"] [data-testid="compare-steps"]');
    await box.waitFor({ timeout: 60000 });
    const rows = box.locator("tbody tr");
    ok(await rows.count() === C.steps.rows.length, `compare: one row per step figure (${C.steps.rows.length})`);
    for (const [i, r] of C.steps.rows.entries()) {
      ok((await rows.nth(i).getAttribute("data-figure")) === r.figure, `compare: row ${r.figure}`);
      for (const [j, v] of r.values.entries()) {
        const cell = await rows.nth(i).locator("td").nth(1 + j).textContent();
        if (v === null) ok(cell === "unknown", `compare: ${r.figure} unknown in run ${j}, never 0`);
        else sameUs(cell, v, `compare: ${r.figure} of run ${j}`);
      }
    }
    for (const [run, sentence] of Object.entries(C.steps.limits)) {
      if (sentence) ok((await box.locator(`[data-testid="compare-limits"] li[data-run="${run}"]`).textContent()) === `${run}: ${sentence}`, `compare: the limit of ${run}`);
    }
  }
});

// Browser test of the Attention tab against a real `tensorboard --logdir` (started by
// tests/test_browser.py). Drives Debian's chromium with playwright-core, compares every number
// it reads on screen with the backend's JSON fetched from the same server, and fails on any
// console error. Run by pytest; by hand:
//   TB_URL=http://127.0.0.1:6006 RUNS_JSON='{"eager":..,"flash":..,...}' node browser/e2e.mjs
import { TB, api, checkLegends, ok, openTab, run, shot, watch } from "./harness.mjs";

const RUNS = JSON.parse(process.env.RUNS_JSON || "{}");
if (!TB) throw new Error("set TB_URL");
for (const k of ["eager", "flash", "xss", "negative", "bad"]) if (!RUNS[k]) throw new Error(`RUNS_JSON lacks ${k}`);



/** "513.12 ms" -> µs, and the rounding the display allows. */
function parseUs(text) {
  const m = /(-|\u2212|\+)?([\d.]+)\s*(µs|ms|s)\b/.exec(text || "");
  if (!m) return null;
  const mult = { "µs": 1, ms: 1e3, s: 1e6 }[m[3]];
  const decimals = (m[2].split(".")[1] || "").length;
  const v = Number(m[2]) * mult * (m[1] === "-" || m[1] === "\u2212" ? -1 : 1);
  return { v, tol: 0.5 * 10 ** -decimals * mult + 1e-6 };
}
function sameUs(text, us, what) {
  const p = parseUs(text);
  ok(p && Math.abs(p.v - us) <= p.tol, `${what}: shows "${text}" for ${us} µs`);
}
function samePct(text, share, what) {
  const m = /([\d.]+)%/.exec(text || "");
  ok(m && Math.abs(Number(m[1]) - share * 100) <= 0.05 + 1e-9, `${what}: shows "${text}" for share ${share}`);
}
const sum = (xs) => xs.reduce((a, b) => a + b, 0);

// A unit as a word of its own ("1.23 ms", "time (µs)"), not inside a word ("since", "bytes").
const UNIT = /(?:^|[^A-Za-z\u00b5])(µs|us|ns|ms|s|B|KiB|MiB|GiB)(?![A-Za-z])/;
/** Each chart's named axes (data-axes: title and one tick's text): a title states no unit its ticks
 *  carry (the ticks say µs/ms/s), and the titles are the ones expected, by axis. */
async function checkAxes(view, chart, want) {
  const el = view.locator(`[data-chart="${chart}"]`).first();
  const axes = JSON.parse((await el.getAttribute("data-axes")) || "[]");
  for (const a of axes) {
    const tickUnit = (UNIT.exec(a.tick) || [])[1], nameUnit = (UNIT.exec(a.name) || [])[1];
    ok(!(tickUnit && nameUnit), `${chart} ${a.axis} axis: title "${a.name}" names no unit beside ticks like "${a.tick}"`);
  }
  for (const [axis, test] of Object.entries(want)) {
    const a = axes.find((x) => x.axis === axis);
    ok(!!a && (test instanceof RegExp ? test.test(a.name) : a.name === test), `${chart} ${axis} axis title: ${a?.name}`);
  }
}

await run(async (browser) => {
  const dialogs = [];
  function watchDialogs(page) {
    watch(page);
    page.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  }

  async function selectRun(frame, run) {
    await frame.locator('[data-testid="run-select"]').selectOption(run);
  }

  const page = await browser.newPage();
  watchDialogs(page);

  // The backend's own answers, fetched from the same server.
  const runsDoc = (await api("runs")).body;
  const runNames = runsDoc.runs.map((r) => r.run);
  for (const k of ["eager", "flash", "xss", "negative", "bad"]) ok(runNames.includes(RUNS[k]), `backend lists run ${RUNS[k]}`);

  // ---- the tab appears; the first view shows loading or the summary --------------------------------
  const { tab, frame } = await openTab(page, "#tb_attn");
  ok(await tab.isVisible(), "TensorBoard shows an Attention tab");
  // The app's frame is up before its first /runs answer draws the pickers: wait for the picker, not a moment.
  await frame.locator('[data-testid="run-select"] option').first().waitFor({ state: "attached", timeout: 60000 });
  const picked = await frame.locator('[data-testid="run-select"] option').count();
  ok(picked === runNames.length, `run picker lists every run: ${picked} of ${runNames.length}`);

  // Wait for every analysis, so the rest compares finished reports.
  const reports = {};
  for (const k of ["eager", "flash", "xss", "negative"]) reports[k] = (await api(`report?run=${encodeURIComponent(RUNS[k])}`)).body;
  const badAnswer = await api(`report?run=${encodeURIComponent(RUNS.bad)}`);
  ok(badAnswer.status >= 400 && typeof badAnswer.body.error === "string", `backend refuses the broken run: ${badAnswer.body.error}`);

  // ---- Summary of the eager run ---------------------------------------------------------------
  await selectRun(frame, RUNS.eager);
  const E = reports.eager;
  // GPU traces (../shared) or the suite's own CPU recordings: every check reads the report's own basis.
  const B = E.time_basis === "cpu" ? "cpu" : "gpu";
  const K = `${B}_us`;
  const unit = B === "cpu" ? "op" : "kernel";
  // The Overview opens first (attention in its step); the Summary is one tab over.
  const ovView = frame.locator('[data-view="overview"]');
  await ovView.waitFor({ timeout: 60000 });
  ok((await ovView.locator('[data-testid="limit"]').textContent()) === E.overview.limit.sentence,
    `the tab opens on the Overview and its limit sentence: ${E.overview.limit.sentence}`);
  await frame.locator('.attn-tabs [data-tab="summary"]').click();
  const sumView = frame.locator('[data-view="summary"]');
  await sumView.waitFor({ timeout: 60000 });
  const deviceName = E.device?.name || "CPU only (no GPU kernels in this trace)";
  ok((await sumView.locator('[data-card="device"] .card-value').textContent()) === deviceName, `summary shows device ${deviceName}`);
  samePct(await sumView.locator('[data-card="share"] .card-value').textContent(), E.attention_share, "summary attention share");
  sameUs(await sumView.locator('[data-card="share"] .card-detail').textContent(), E[`attention_${K}`], "summary attention time");
  ok((await sumView.locator('[data-card="calls"] .card-value').textContent()).replace(/,/g, "") === String(E.calls), `summary shows ${E.calls} calls`);
  for (const impl of E.implementations) {
    ok(await sumView.locator(`[data-testid="badges"] [data-impl="${impl.implementation}"]`).count() > 0, `badge for ${impl.layer_type}: ${impl.implementation}`);
  }
  const verdictTexts = await sumView.locator("[data-verdict]").allInnerTexts();
  for (const v of E.verdicts) ok(verdictTexts.some((t) => t.includes(v.message)), `verdict shown: ${v.message.slice(0, 60)}`);
  ok(E.verdicts.some((v) => v.id === "eager_attention"), "the eager run has the eager-attention verdict");
  for (const row of await sumView.locator('[data-testid="layer-types"] tbody tr').all()) {
    const lt = await row.getAttribute("data-layer-type");
    const layers = E.layers.filter((l) => l.layer_type === lt);
    sameUs(await row.locator("td").nth(3).textContent(), sum(layers.map((l) => l[K])), `summary time of ${lt}`);
    const top = layers.reduce((a, b) => (b[K] > a[K] ? b : a));
    const tf = await row.locator("[data-tflops]").textContent();
    // The cell carries its unit (21.7 GFLOP/s on a CPU, 1.23 TFLOP/s on a GPU): back to TFLOP/s, to 3 significant digits.
    const scale = { "TFLOP/s": 1, "GFLOP/s": 1e-3, "MFLOP/s": 1e-6, "kFLOP/s": 1e-9 }[(tf || "").split(" ")[1]] ?? NaN;
    ok(top.tflops == null ? tf === "—" : Math.abs(parseFloat(tf) * scale - top.tflops) <= 0.006 * Math.abs(top.tflops),
      `summary FLOP rate of ${lt}: ${tf} vs ${top.tflops} TFLOP/s`);
  }
  for (const row of await sumView.locator('[data-testid="summary-stages"] tbody tr').all()) {
    const stage = await row.getAttribute("data-stage");
    const pass = await row.getAttribute("data-pass");
    const want = sum(E.stages.filter((s) => s.stage === stage && s.pass === pass).map((s) => s[K]));
    sameUs(await row.locator("td").nth(2).textContent(), want, `summary stage ${stage}`);
  }
  const basisTitle = B === "gpu" ? "GPU kernel time" : "CPU op time";
  if (await sumView.locator('[data-chart="summary-stages"]').count()) {
    await sumView.locator('[data-chart="summary-stages"] canvas').first().waitFor();
    await checkAxes(sumView, "summary-stages", { x: basisTitle });
  }
  const spanText = await sumView.locator("h2 .sub").textContent();
  ok(/ UTC$/.test(spanText) && !/\d{19}/.test(spanText), `summary names the span as a time, not a 19-digit number: ${spanText}`);
  const spanOption = await frame.locator('[data-testid="span-select"] option:checked').textContent();
  ok(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/.test(spanOption), `span picker shows a readable time: ${spanOption}`);
  await checkLegends(sumView, "summary");
  await shot(page, "summary");

  // ---- Stages by layer --------------------------------------------------------------------
  await frame.locator('.attn-tabs [data-tab="stages"]').click();
  const stView = frame.locator('[data-view="stages"]');
  await stView.locator('[data-chart="stages"] canvas').first().waitFor({ timeout: 30000 });
  await checkAxes(stView, "stages", { y: basisTitle });
  const layerRows = stView.locator('[data-testid="stages-table"] tbody tr');
  ok(await layerRows.count() === E.layers.length, `stages table has ${E.layers.length} layers`);
  for (const row of (await layerRows.all()).slice(0, 8)) {
    const name = await row.getAttribute("data-layer");
    const L = E.layers.find((l) => l.layer === name);
    const want = sum((L.stages || []).filter((s) => s.pass === "fwd").map((s) => s[K]));
    sameUs(await row.locator("td").last().textContent(), want, `stages total of ${name}`);
  }
  // Click the 4th bar of the chart: it opens that layer's kernels.
  const order = await layerRows.evaluateAll((rows) => rows.map((r) => r.getAttribute("data-layer")));
  const box = await stView.locator('[data-chart="stages"]').boundingBox();
  const n = order.length;
  const plotW = box.width - 70 - 20;
  const idx = Math.min(3, n - 1);
  const many = n > 40;
  const detail = stView.locator('[data-testid="layer-detail"]');
  // A click during ECharts' entry animation can land between bars: click again, a few times at most.
  for (let attempt = 0; attempt < 4; attempt++) {
    await page.mouse.click(box.x + 70 + (idx + 0.5) * (plotW / n), box.y + box.height - (many ? 90 : 70) - 40);
    try {
      await detail.waitFor({ timeout: attempt < 3 ? 3000 : 10000 });
      break;
    } catch (err) {
      if (attempt === 3) throw err;
      await page.waitForTimeout(500);
    }
  }
  ok((await detail.getAttribute("data-layer")) === order[idx], `clicking bar ${idx} opens layer ${order[idx]}`);
  const clicked = E.layers.find((l) => l.layer === order[idx]);
  const wantKernels = sum((clicked.kernels || []).map((k) => k.count));
  const shownCounts = await detail.locator('[data-testid="layer-kernels"] tbody tr td:nth-child(3)').allInnerTexts();
  ok(sum(shownCounts.map((t) => Number(t.replace(/,/g, "")))) === wantKernels,
    `layer detail lists the ${wantKernels} kernels of all ${clicked.calls} calls of the layer`);
  await checkLegends(stView, "stages");
  await shot(page, "stages");
  // CPU toggle: the numbers switch to CPU time (a CPU trace is there already, its GPU toggle off).
  if (B === "gpu") await stView.locator('[data-toggle="basis"] [data-value="cpu"]').click();
  else ok(await stView.locator('[data-toggle="basis"] [data-value="gpu"]').isDisabled(), "GPU toggle is off for a CPU trace");
  const cpuRow = frame.locator('[data-view="stages"] [data-testid="stages-table"] tbody tr').first();
  await cpuRow.waitFor({ state: "attached" });
  const cpuName = await cpuRow.getAttribute("data-layer");
  const cpuL = E.layers.find((l) => l.layer === cpuName);
  sameUs(await cpuRow.locator("td").last().textContent(), sum(cpuL.stages.filter((s) => s.pass === "fwd").map((s) => s.cpu_us)), `CPU toggle: total of ${cpuName}`);
  const hasBwd = E.stages.some((s) => s.pass === "bwd");
  ok(await frame.locator('[data-toggle="pass"] [data-value="bwd"]').isDisabled() === !hasBwd,
    `backward toggle is ${hasBwd ? "on for a training" : "off for a forward-only"} trace`);
  if (B === "gpu") await frame.locator('[data-toggle="basis"] [data-value="gpu"]').click();

  // ---- Kernels by stage -------------------------------------------------------------------
  await frame.locator('.attn-tabs [data-tab="kernels"]').click();
  const kView = frame.locator('[data-view="kernels"]');
  await kView.locator('[data-testid="kernels-table"]').waitFor();
  const kRows = kView.locator("tr.kernel");
  // A CPU trace lists its CPU ops, and says "op" in the column and the filter.
  const KROWS = B === "gpu" ? E.kernels : (E.ops || []).map((o) => ({ ...o, gpu_us: o.cpu_us }));
  const ATT = E[`attention_${K}`];
  ok((await kView.locator('th[data-column="name"]').textContent()) === (B === "gpu" ? "Kernel" : "Op"), `the name column says ${unit}`);
  ok((await kView.locator('[data-testid="kernel-filter"]').getAttribute("placeholder")).startsWith(`filter by ${unit} name`), `the filter says ${unit}`);
  ok(await kRows.count() === KROWS.length, `kernels table lists all ${KROWS.length} ${unit}s`);
  for (const row of await kRows.all()) {
    const name = await row.getAttribute("data-kernel");
    const stage = await row.getAttribute("data-stage");
    const pass = await row.getAttribute("data-pass");
    const k = KROWS.find((x) => x.name === name && x.stage === stage && (x.pass || "fwd") === pass);
    ok(!!k, `kernel row is a backend kernel: ${name.slice(0, 50)}`);
    const cells = row.locator("td");
    ok((await cells.nth(2).textContent()).replace(/,/g, "") === String(k.count), `count of ${name.slice(0, 40)}`);
    sameUs(await cells.nth(3).textContent(), k.gpu_us, `total of ${name.slice(0, 40)}`);
    samePct(await cells.nth(5).textContent(), k.gpu_us / ATT, `share of ${name.slice(0, 40)}`);
  }
  // Each kernel's fingerprint (the backend's decoding of its name) under the name; "unknown" is not shown.
  for (const k of KROWS.filter((x) => x.fingerprint).slice(0, 8)) {
    const fp = kView.locator(`tr.kernel[data-kernel="${k.name.replace(/"/g, '\\"')}"] [data-testid="fingerprint"]`);
    if (k.fingerprint === "unknown") ok(await fp.count() === 0, `no fingerprint line for ${k.name.slice(0, 40)}`);
    else ok((await fp.first().textContent()) === k.fingerprint, `fingerprint of ${k.name.slice(0, 40)}: ${k.fingerprint}`);
  }
  for (const g of await kView.locator("tr.group").all()) {
    const [pass, stage] = (await g.getAttribute("data-group")).split(":");
    sameUs(await g.locator("td").nth(3).textContent(), sum(KROWS.filter((k) => k.stage === stage && (k.pass || "fwd") === pass).map((k) => k.gpu_us)), `group total ${stage}`);
  }
  // Sort by count, ascending after a second click.
  await kView.locator('th[data-sort="count"]').click();
  await kView.locator('th[data-sort="count"]').click();
  const firstGroupCounts = await kView.locator("tbody").evaluate((tb) => {
    const out = [];
    let seen = 0;
    for (const tr of tb.rows) {
      if (tr.classList.contains("group")) { if (++seen > 1) break; continue; }
      out.push(Number(tr.cells[2].textContent.replace(/,/g, "")));
    }
    return out;
  });
  ok(firstGroupCounts.every((c, i) => i === 0 || firstGroupCounts[i - 1] <= c), `sorted by count ascending: ${firstGroupCounts}`);
  // Repeated short names are told apart: different full names never show the same short text.
  const shownShort = await kRows.evaluateAll((rs) => rs.map((r) => [r.getAttribute("data-kernel"), ((k) => k?.querySelector("summary") ?? k)(r.querySelector(".kcell .kname"))?.textContent ?? ""]));
  const byShort = new Map();
  for (const [full, text] of shownShort) byShort.set(text, new Set([...(byShort.get(text) || []), full]));
  const clashes = [...byShort].filter(([, fulls]) => fulls.size > 1);
  ok(clashes.length === 0, `every short ${unit} name stands for one full name${clashes.length ? `: ${clashes[0][0]} is ${[...clashes[0][1]].join(" / ")}` : ""} (${byShort.size} names)`);
  // Full kernel name on demand.
  const longK = KROWS.find((k) => k.name.length > 60) || KROWS.find((k) => k.name.includes("::"));
  const det = kView.locator(`tr.kernel[data-kernel="${longK.name.replace(/"/g, '\\"')}"] details.kname`).first();
  await det.locator("summary").click();
  ok((await det.locator(".kname-full").textContent()) === longK.name, "clicking a short name shows the full kernel name");
  await shot(page, "kernels");
  await kView.locator('[data-testid="kernel-filter"]').fill("softmax");
  await page.waitForTimeout(400);
  const filtered = await frame.locator('[data-view="kernels"] tr.kernel').evaluateAll((rs) => rs.map((r) => r.getAttribute("data-kernel")));
  const wantFiltered = KROWS.filter((k) => k.name.toLowerCase().includes("softmax") || (k.stage || "").includes("softmax") || (k.implementation || "").toLowerCase().includes("softmax"));
  ok(filtered.length === wantFiltered.length && filtered.length > 0, `filter "softmax" keeps ${wantFiltered.length} kernels`);
  await frame.locator('[data-view="kernels"] [data-testid="kernel-filter"]').fill("");

  // ---- One call's timeline ----------------------------------------------------------------
  await frame.locator('.attn-tabs [data-tab="timeline"]').click();
  const tView = frame.locator('[data-view="timeline"]');
  await tView.locator('[data-chart="timeline"] canvas').first().waitFor({ timeout: 30000 });
  const call0 = (await api(`call?run=${encodeURIComponent(RUNS.eager)}&id=${E.call_samples[0].id}`)).body;
  ok(await tView.locator('[data-testid="timeline-table"] tbody tr').count() === call0.events.length, `timeline shows the ${call0.events.length} events of call ${call0.id}`);
  ok(await tView.locator('[data-testid="timeline-table"] tr[data-kind="kernel"]').count() === call0.events.filter((e) => e.kind === "kernel").length, "timeline shows its kernels");
  // Rows are threads and nesting depths, and GPU streams; never "CPU 0".
  const laneNames = await tView.locator('[data-testid="timeline-table"] tbody tr').evaluateAll((rs) => [...new Set(rs.map((r) => r.getAttribute("data-lane")))]);
  ok(laneNames.every((l) => /depth \d+|^GPU( stream \S+)?( \(\d+\))?$/.test(l)) && !laneNames.some((l) => /^CPU \d/.test(l)), `timeline rows: ${laneNames.join(", ")}`);
  const streams = [...new Set(call0.events.filter((e) => e.kind === "kernel").map((e) => e.stream))];
  for (const st of streams) ok(laneNames.some((l) => l.startsWith(`GPU stream ${st}`)), `GPU stream ${st} has its own row`);
  // A backward far after its forward is its own chart; the duration is what ran, not the gap.
  const ext = (evs) => evs.length ? [Math.min(...evs.map((e) => e.start_us)), Math.max(...evs.map((e) => e.start_us + e.dur_us))] : null;
  const fx = ext(call0.events.filter((e) => e.pass !== "bwd")), bx = ext(call0.events.filter((e) => e.pass === "bwd"));
  const far = fx && bx && bx[0] - fx[1] > Math.max(fx[1] - fx[0], bx[1] - bx[0]);
  ok(await tView.locator('[data-chart="timeline"]').count() === (far ? 2 : 1), `timeline draws ${far ? "forward and backward apart" : "the call whole"}`);
  await checkAxes(tView, "timeline", { x: far ? /^time since the (forward|backward) starts$/ : "time since the call starts" });
  const durAttr = Number(await tView.locator('[data-testid="call-duration"]').getAttribute("data-us"));
  ok(Math.abs(durAttr - (far ? (fx[1] - fx[0]) + (bx[1] - bx[0]) : call0.dur_us)) < 0.01, `timeline duration ${durAttr} µs`);
  // Any step and any sampled call can be picked.
  const stepsShown = await tView.locator('[data-testid="step-select"] option').count();
  ok(stepsShown === new Set(E.call_samples.map((c) => c.step)).size, `step picker offers ${stepsShown} steps`);
  const callsShown = await tView.locator('[data-testid="call-select"] option').count();
  ok(callsShown === E.call_samples.filter((c) => c.step === call0.step).length, `call picker offers the ${callsShown} calls of step ${call0.step}`);
  if (callsShown > 1) {
    const other = E.call_samples.filter((c) => c.step === call0.step)[1];
    await tView.locator('[data-testid="call-select"]').selectOption(String(other.id));
    await frame.locator(`[data-view="timeline"] [data-testid="call-select"] option[value="${other.id}"]:checked`).waitFor({ state: "attached" });
    await frame.locator('[data-view="timeline"] [data-testid="timeline-table"] tbody tr').first().waitFor({ state: "attached" });
    ok(await frame.locator('[data-view="timeline"] [data-testid="timeline-table"] tbody tr').count() === other.events.length, `picking call ${other.id} shows its ${other.events.length} events`);
    await frame.locator('[data-view="timeline"] [data-testid="call-select"]').selectOption(String(call0.id));
    await frame.locator(`[data-view="timeline"] [data-testid="call-select"] option[value="${call0.id}"]:checked`).waitFor({ state: "attached" });
  }
  await shot(page, "timeline");

  // ---- Compare: pick two runs in the picker --------------------------------------------------
  await frame.locator('.attn-tabs [data-tab="compare"]').click();
  const cView = frame.locator('[data-view="compare"]');
  await cView.locator('[data-testid="run-picker"]').waitFor();
  await cView.locator(`input[data-run="${RUNS.eager}"]`).check();
  await frame.locator(`[data-view="compare"] input[data-run="${RUNS.flash}"]`).check();
  const heads = frame.locator('[data-view="compare"] [data-testid="compare-headlines"]');
  await heads.waitFor({ timeout: 60000 });
  const C = (await api(`compare?run=${encodeURIComponent(RUNS.eager)}&run=${encodeURIComponent(RUNS.flash)}`)).body;
  const headline = await heads.locator(".headline").first().textContent();
  // other models or devices, then whether the difference is beyond noise, are said before the percentage
  const said = (C.differences || []).map((d) => `${d}; `).join("") + `${RUNS.flash}: `
    + (C.noise && C.noise.verdict !== "beyond_noise" ? `${C.noise.headline}: ` : "");
  ok(headline.startsWith(`${said}attention \u2212`) && /flash|cpu_fused/.test(headline) && /replaces? .*softmax/.test(headline), `compare headline: ${headline}`);
  ok((await heads.locator(".backend-summary").textContent()) === C.summary, "compare shows the backend's summary line");
  const cmpRows = frame.locator('[data-view="compare"] [data-testid="compare-stages"] tbody tr');
  ok(await cmpRows.count() === C.stages.length, `compare lists ${C.stages.length} stages`);
  let prev = Infinity;
  for (const [i, row] of (await cmpRows.all()).entries()) {
    const s = C.stages[i];
    ok((await row.getAttribute("data-stage")) === s.stage, `compare row ${i} is ${s.stage} (sorted by size of change)`);
    const cells = row.locator("td");
    for (let j = 0; j < s.values.length; j++) sameUs(await cells.nth(1 + j).textContent(), s.values[j], `compare ${s.stage} run ${j}`);
    sameUs(await cells.nth(1 + s.values.length).textContent(), s.delta_us, `compare delta ${s.stage}`);
    ok(Math.abs(s.delta_us) <= prev, "delta table sorted by size of change");
    prev = Math.abs(s.delta_us);
  }
  for (const t of C.totals) {
    sameUs(await frame.locator(`[data-view="compare"] [data-testid="compare-totals"] tr[data-run="${t.run}"] td`).nth(1).textContent(), C.time_basis === "cpu" ? t.attention_cpu_us : t.attention_gpu_us, `compare total of ${t.run}`);
  }
  for (const run of C.runs) {
    const h4 = await frame.locator(`[data-view="compare"] .only-in-run[data-run="${run}"] h4`).textContent();
    ok(h4.includes(`${C.kernels_only_in_counts[run]} kernel`), `kernels only in ${run}: ${h4}`);
  }
  await frame.locator('[data-view="compare"] [data-chart="compare"] canvas').first().waitFor();
  await checkAxes(cView, "compare", { y: C.time_basis === "gpu" ? "GPU kernel time" : "CPU op time" });
  await checkLegends(cView, "compare");
  await shot(page, "compare");

  // The URL holds the view and the runs: a new page opened on it shows the same comparison.
  const shared = page.url();
  ok(/attn_view=compare/.test(shared) && shared.includes("attn_compare="), `URL holds the state: ${shared.slice(TB.length)}`);
  const page2 = await browser.newPage();
  watchDialogs(page2);
  const second = await openTab(page2, shared.slice(TB.length + 1));
  await second.frame.locator('[data-view="compare"] [data-testid="compare-headlines"]').waitFor({ timeout: 60000 });
  ok((await second.frame.locator('[data-view="compare"] .headline').first().textContent()) === headline, "a shared link opens the same comparison");
  await page2.close();

  // ---- Scaling ----------------------------------------------------------------------------
  const scalingRuns = RUNS.scaling || [];
  if (scalingRuns.length >= 2) {
    for (const r of [RUNS.eager, RUNS.flash]) await frame.locator(`[data-view="compare"] input[data-run="${r}"]`).uncheck();
    for (const r of scalingRuns) await frame.locator(`[data-view="compare"] input[data-run="${r}"]`).check();
  }
  await frame.locator('.attn-tabs [data-tab="scaling"]').click();
  const sView = frame.locator('[data-view="scaling"]');
  await sView.locator('[data-testid="scaling-table"]').waitFor({ timeout: 120000 });
  await sView.locator('[data-chart="scaling-time"] canvas').first().waitFor();
  await checkAxes(sView, "scaling-time", { x: "sequence length", y: "time per call" });
  const sRows = await sView.locator('[data-testid="scaling-table"] tbody tr').all();
  ok(sRows.length >= 2, `scaling shows ${sRows.length} runs`);
  for (const row of sRows) {
    const run = await row.getAttribute("data-run");
    const R = (await api(`report?run=${encodeURIComponent(run)}`)).body;
    const basis = await row.getAttribute("data-basis"); // each series on its own time basis
    ok(basis === R.time_basis, `scaling basis of ${run}: ${basis}, the report's ${R.time_basis}`);
    sameUs(await row.locator("td").nth(5).textContent(), R[`attention_${basis}_us`] / R.calls, `scaling time per call of ${run}`);
    const want = R.metadata?.seq_len ?? R.layers.reduce((a, b) => (b[`${basis}_us`] > a[`${basis}_us`] ? b : a)).shape.q_len;
    ok(Number((await row.locator("td").nth(3).textContent()).replace(/,/g, "")) === Number(want), `scaling length of ${run}: ${want}`);
  }
  await checkLegends(sView, "scaling");
  await shot(page, "scaling");

  // ---- Backward pass on a CPU training run (the demo's): the toggle switches to backward stages --------
  const training = scalingRuns.find((r) => /eager/.test(r));
  if (training) {
    const T = (await api(`report?run=${encodeURIComponent(training)}`)).body;
    await selectRun(frame, training);
    await frame.locator('.attn-tabs [data-tab="stages"]').click();
    await frame.locator('[data-view="stages"] [data-toggle="pass"] [data-value="bwd"]').click();
    const bwdRows = frame.locator('[data-view="stages"] [data-testid="stages-table"] tbody tr');
    await bwdRows.first().waitFor({ state: "attached" });
    ok(T.time_basis === "cpu" && await frame.locator('[data-view="stages"] [data-toggle="basis"] [data-value="gpu"]').isDisabled(), "GPU toggle is off for a CPU trace");
    for (const row of await bwdRows.all()) {
      const name = await row.getAttribute("data-layer");
      const L = T.layers.find((l) => l.layer === name);
      sameUs(await row.locator("td").last().textContent(), sum(L.stages.filter((s) => s.pass === "bwd").map((s) => s.cpu_us)), `backward CPU total of ${name}`);
    }
  }

  // ---- Escaping: a kernel named <img src=x onerror=...> and a run named like markup ---------------
  await frame.locator('.attn-tabs [data-tab="kernels"]').click();
  await selectRun(frame, RUNS.xss);
  const xssRow = frame.locator('[data-view="kernels"] tr.kernel[data-kernel="<img src=x onerror=alert(1)>"]').first();
  await xssRow.waitFor({ timeout: 60000 });
  ok((await xssRow.locator(".kcell").textContent()).includes("<img src=x onerror=alert(1)>"), "a kernel named <img src=x onerror=…> renders as text");
  const runOption = await frame.locator('[data-testid="run-select"] option:checked').textContent();
  ok(runOption.includes(RUNS.xss), `a run named ${RUNS.xss} renders as text`);
  await frame.locator('.attn-tabs [data-tab="timeline"]').click();
  await frame.locator('[data-view="timeline"] [data-testid="timeline-table"]').waitFor({ state: "attached" });
  ok((await frame.locator('[data-view="timeline"] [data-testid="timeline-table"]').textContent()).includes("<img src=x onerror=alert(1)>"), "the timeline shows the kernel name as text");
  await frame.locator('.attn-tabs [data-tab="summary"]').click();
  await frame.locator('[data-view="summary"]').waitFor();
  ok(await frame.locator("img").count() === 0, "no <img> element exists in the plugin's document");
  ok(dialogs.length === 0, "no script from a trace ran (no alert)");

  // ---- Empty and error states ---------------------------------------------------------------
  await selectRun(frame, RUNS.negative);
  const empty = frame.locator('[data-view="summary"] [data-state="empty"]');
  await empty.waitFor({ timeout: 30000 });
  ok((await empty.textContent()).includes("No attention found"), "a trace without attention says so");
  await selectRun(frame, RUNS.bad);
  const err = frame.locator('[data-state="error"]');
  await err.waitFor({ timeout: 30000 });
  ok((await err.textContent()).includes(badAnswer.body.error), `a broken trace shows the backend's message: ${badAnswer.body.error}`);

  await page.waitForTimeout(300);
});

// Browser test of the Reading panel (issue 25 item 7) against a real `tensorboard --logdir` started by
// tests/test_browser_reading.py: the post's variants recorded on the CPU by `python -m demo --post`, and
// the H100 BERT flash trace when ../shared/traces has it. Every check compares what the panel shows with
// the run's /report (its reading row, its layer, its kernel reading), not with /call's answer.
// By hand: TB_URL=http://127.0.0.1:6006 MATH_RUN=post-sdpa-math-L32 NAIVE_RUN=post-naive-L32 node browser/reading.mjs
import { api, ok, openTab, run, SHOTS, TB, watch } from "./harness.mjs";
import { join } from "node:path";

const MATH_RUN = process.env.MATH_RUN || "";
const NAIVE_RUN = process.env.NAIVE_RUN || "";
const GPU_RUN = process.env.GPU_RUN || "";
if (!TB || !MATH_RUN || !NAIVE_RUN) throw new Error("set TB_URL, MATH_RUN and NAIVE_RUN");

// format.ts's fmtUs, so that a number the panel shows can be compared with the report's µs.
function fmtUs(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)} s`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(2)} ms`;
  return `${v.toFixed(1)} µs`;
}

/** The run's report, its first sampled call, that call's layer and its reading row. */
async function facts(runName) {
  const R = (await api(`report?run=${encodeURIComponent(runName)}`)).body;
  const call = R.call_samples[0];
  const layer = R.layers.find((l) => l.layer === call.layer);
  const group = R.reading.find((g) => g.layer_type === layer.layer_type && g.implementation === call.implementation);
  ok(!!group, `${runName}: the report reads ${layer.layer_type} × ${call.implementation}`);
  return { R, call, layer, group };
}

async function openCall(browser, runName, id) {
  const page = await browser.newPage();
  watch(page);
  const { frame } = await openTab(page, `#tb_attn&attn_view=timeline&attn_run=${encodeURIComponent(runName)}&attn_call=${id}`);
  const panel = frame.locator('[data-view="timeline"] [data-testid="reading-panel"]');
  await panel.waitFor({ timeout: 60000 });
  return { page, frame, panel };
}

async function checkExpected(panel, group, runName) {
  const e = group.expected;
  const box = panel.locator('[data-testid="reading-expected"] [data-ran]');
  ok(await box.getAttribute("data-expected") === String(e.expected) && await box.getAttribute("data-ran") === String(e.ran),
    `${runName}: expected ${e.expected}, ran ${e.ran} (the report's numbers)`);
  const head = await panel.locator('[data-testid="reading-headline"]').textContent();
  const unit = e.expected === 1 ? e.unit.replace(/s$/, "") : e.unit;
  ok(head === `expected ${e.expected} ${unit} per forward, ran ${e.ran}`, `${runName}: the headline reads "${head}"`);
  const causes = await panel.locator('[data-testid="reading-extra"]').evaluateAll((rs) => rs.map((r) => r.getAttribute("data-cause")));
  ok(JSON.stringify(causes) === JSON.stringify(e.extras.map((x) => x.cause)), `${runName}: the extras are the report's: ${causes.join(", ") || "none"}`);
  for (const x of e.extras) {
    const row = await panel.locator(`[data-testid="reading-extra"][data-cause="${x.cause}"]`).first().textContent();
    ok(row.includes(x.what) && row.includes(x.fix) && row.includes(`${fmtUs(x.us_per_call)} per call`)
      && (x.us_per_step === null || row.includes(`${fmtUs(x.us_per_step)} per step`)),
    `${runName}: ${x.cause} is named with its cause, its cost per call (${fmtUs(x.us_per_call)}) and per step, and its fix`);
  }
}

async function checkWhyNotFlash(panel, layer, runName) {
  const w = layer.why_not_flash;
  if (!w) {
    const u = await panel.locator('[data-testid="reading-unknown"][data-piece="why_not_flash"]').textContent();
    ok(u === `unknown: ${layer.why_not_flash_unknown}`, `${runName}: why not flash is unknown, with the reason`);
    return;
  }
  for (const b of w.backends) {
    const li = panel.locator(`[data-testid="reading-backend"][data-backend="${b.backend}"]`);
    const state = b.eligible === false ? "refused" : b.eligible ? "eligible" : "unknown";
    ok(await li.getAttribute("data-state") === state, `${runName}: ${b.backend} ${state}`);
    for (const x of b.refusals) {
      const t = await li.locator(`[data-testid="reading-refusal"][data-check="${x.check}"]`).textContent();
      ok(t.includes(x.reason) && t.includes(x.fix), `${runName}: ${b.backend} refused: "${x.reason}", fix: ${x.fix}`);
    }
  }
}

async function checkHost(panel, group, runName) {
  const h = group.host;
  const box = panel.locator('[data-testid="reading-host"] [data-verdict]');
  if (h.cpu_only) {
    // no GPU in the trace: said so, with the host time and no GPU, launch or sync figure
    ok(await box.getAttribute("data-verdict") === "CPU only", `${runName}: host vs GPU says the trace has no GPU`);
    const text = await box.textContent();
    ok(text.includes(`${fmtUs(h.host_us_per_call)} on the CPU per call`), `${runName}: CPU time ${fmtUs(h.host_us_per_call)} per call`);
    ok(!/on the GPU|launch|dispatch/.test(text), `${runName}: no GPU, launch or dispatch figure on a CPU trace`);
    return;
  }
  const verdict = h.host_bound === true ? "host-bound" : h.host_bound === false ? "GPU-bound" : "unknown";
  ok(await box.getAttribute("data-verdict") === verdict, `${runName}: host vs GPU verdict ${verdict}`);
  const text = await box.textContent();
  ok(text.includes(`${fmtUs(h.host_us_per_call)} on the host`), `${runName}: host time ${fmtUs(h.host_us_per_call)} per call`);
  if (h.gpu_us_per_call === null) {
    ok(text.includes("GPU time unknown") && !/0\.0 µs on the GPU/.test(text), `${runName}: GPU time unknown, not 0`);
  } else {
    ok(text.includes(`vs ${fmtUs(h.gpu_us_per_call)} on the GPU`), `${runName}: GPU time ${fmtUs(h.gpu_us_per_call)} per call`);
  }
  if (h.fix) ok(text.includes(h.fix), `${runName}: the host-bound fix`);
}

async function panelShot(page, panel, name) {
  if (!SHOTS) return;
  await page.setViewportSize({ width: 1400, height: 1000 });
  await panel.scrollIntoViewIfNeeded();
  await page.waitForTimeout(300);
  await panel.screenshot({ path: join(SHOTS, `${name}.png`) });
  console.log(`screenshot ${name}.png`);
}

await run(async (browser) => {
  // The post's SDPA math variant (float32, is_causal, math pinned) on the CPU: the mask built per call; judged
  // by the CPU's rules, the one refusal of the CPU flash kernel is the pin the collector recorded (sdpa_kernel
  // switched flash off at the call); float32 refuses nothing.
  const m = await facts(MATH_RUN);
  ok(m.group.expected.extras.some((x) => x.cause === "mask_built_per_call"), "the math run's report names the mask built per call");
  const { page, panel } = await openCall(browser, MATH_RUN, m.call.id);
  ok((await panel.locator('[data-testid="reading-title"]').textContent()).startsWith(`${m.layer.layer_type} · ${m.call.implementation}`),
    "the panel is titled by the call's layer type × implementation");
  await checkExpected(panel, m.group, MATH_RUN);
  await checkWhyNotFlash(panel, m.layer, MATH_RUN);
  ok(m.layer.why_not_flash.backends.every((b) => b.backend === "flash_cpu"
    && b.refusals.map((r) => r.check).join() === "check_runtime_disabled_flash"),
    "the CPU call is judged by the CPU's flash rules: the recorded pin refuses it, float32 does not");
  await checkHost(panel, m.group, MATH_RUN);
  const k = await panel.locator('[data-testid="reading-unknown"][data-piece="kernels"]').textContent();
  ok(/^unknown: no GPU kernels: the trace recorded the CPU only/.test(k), "a CPU trace: no kernels to decode, said with the reason");
  ok((await panel.locator('[data-testid="reading-backward"]').textContent()).includes("forward only"), "the backward is said to be unread");
  await panelShot(page, panel, "reading");

  // The naive out-of-place variant: the hidden copy, named and costed.
  const n = await facts(NAIVE_RUN);
  const naive = await openCall(browser, NAIVE_RUN, n.call.id);
  ok(n.group.expected.extras.some((x) => x.cause === "hidden_copy"), "the naive run's report names the hidden copy");
  await checkExpected(naive.panel, n.group, NAIVE_RUN);
  await checkWhyNotFlash(naive.panel, n.layer, NAIVE_RUN);

  // The same reading where the layer is picked in the Stages view.
  const sp = await browser.newPage();
  watch(sp);
  const { frame } = await openTab(sp, `#tb_attn&attn_view=stages&attn_run=${encodeURIComponent(MATH_RUN)}&attn_layer=${encodeURIComponent(m.layer.layer)}`);
  const lp = frame.locator('[data-testid="layer-detail"] [data-testid="reading-panel"]');
  await lp.waitFor({ timeout: 60000 });
  await checkExpected(lp, m.group, `${MATH_RUN} (stages)`);

  if (GPU_RUN) {
    // The H100 BERT flash trace: fingerprints, occupancy (low by design), host-bound.
    const g = await facts(GPU_RUN);
    const gp = await openCall(browser, GPU_RUN, g.call.id);
    await checkExpected(gp.panel, g.group, GPU_RUN);
    await checkHost(gp.panel, g.group, GPU_RUN);
    await checkWhyNotFlash(gp.panel, g.layer, GPU_RUN);
    const names = [...new Set(g.call.events.filter((e) => e.kind === "kernel").map((e) => e.name))];
    const rows = await gp.panel.locator('[data-testid="reading-kernel"]').evaluateAll((rs) => rs.map((r) => r.getAttribute("data-kernel")));
    ok(JSON.stringify(rows) === JSON.stringify(names), `${GPU_RUN}: the panel lists the call's ${names.length} kernels`);
    const fps = g.R.kernel_reading.fingerprints;
    for (const o of g.layer.occupancy) {
      if (!names.includes(o.name)) continue;
      const row = gp.panel.locator(`[data-testid="reading-kernel"][data-kernel="${o.name.replace(/"/g, '\\"')}"]`);
      const occ = await row.locator('[data-testid="reading-occupancy"]').textContent();
      ok(occ.includes(`theoretical ${o.theoretical_pct.toFixed(1)}%`) && occ.includes(`limited by ${o.limited_by.join(" and ")}`)
        && occ.includes(o.reading), `${GPU_RUN}: ${fps[o.name].library} occupancy ${o.theoretical_pct}% (${o.limited_by.join(", ")})`);
      if (o.reading.includes("low by design")) {
        ok(await row.locator('[data-tag="low by design"]').count() === 1, `${GPU_RUN}: ${fps[o.name].library} is low by design`);
      }
      const text = await row.textContent();
      ok(text.includes(fps[o.name].library) && (!fps[o.name].dtype || text.includes(fps[o.name].dtype)),
        `${GPU_RUN}: its fingerprint (${fps[o.name].summary})`);
      for (const f of fps[o.name].flags) ok(text.includes(f), `${GPU_RUN}: flag "${f.slice(0, 40)}…"`);
    }
    await panelShot(gp.page, gp.panel, "reading_gpu");
  } else {
    console.log("# no GPU run: the shared H100 trace is not present, its checks are skipped");
  }
});

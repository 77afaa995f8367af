// What every browser test shares: the TensorBoard under test, checks that count themselves, the
// backend's JSON (waiting out 202 "loading"), and Debian's chromium started headless with nothing
// reachable but TensorBoard. The scripts are run by the tests/test_browser*.py files.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const TB = (process.env.TB_URL || "").replace(/\/$/, "");
export const API = `${TB}/data/plugin/tb_attn`;
export const SHOTS = process.env.SHOTS_DIR || "";
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

/** Console errors, page errors and requests outside TensorBoard, from every watched page. */
export const problems = [];
export let passed = 0; // a live binding: importers read the current count

export function ok(cond, msg) {
  if (!cond) throw new Error(`FAILED: ${msg}`);
  passed++;
  console.log(`ok ${passed} - ${msg}`);
}

export async function api(path) {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${API}/${path}`);
    if (r.status === 202) { await new Promise((res) => setTimeout(res, 500)); continue; }
    return { status: r.status, body: await r.json() };
  }
  throw new Error(`${path} stayed loading`);
}

/** Collect a page's console errors, page errors and requests outside TensorBoard into problems. */
export function watch(page) {
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()} (${m.location()?.url || ""})`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => {
    // Any network request to somewhere else fails here (no network): none must be made.
    if (!r.url().startsWith(TB)) problems.push(`request outside TensorBoard: ${r.url()}`);
  });
}

/** A fresh headless chromium profile; close() also removes it. */
export async function launch({ height = 1000 } = {}) {
  const userDir = mkdtempSync(join(tmpdir(), "tb-attn-chromium-"));
  const browser = await chromium.launchPersistentContext(userDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    viewport: { width: 1400, height },
    deviceScaleFactor: 1,
  });
  return {
    browser,
    close: async () => {
      await browser.close();
      rmSync(userDir, { recursive: true, force: true });
    },
  };
}

/** The closing check of every script: no problems on any watched page, then the count. */
export function finish() {
  ok(problems.length === 0, `no console or page errors${problems.length ? ":\n  " + problems.join("\n  ") : ""}`);
  console.log(`all ${passed} checks passed`);
}

/** A failed run: the error and what the pages complained about; the process exits 1. */
export function fail(e) {
  console.error(e.stack || String(e));
  if (problems.length) console.error("console problems:\n  " + problems.join("\n  "));
  process.exitCode = 1;
}

const FRAME = 'iframe[src*="plugin_entry.html?name=tb_attn"]';

/** Open TensorBoard at ``hash`` (e.g. "#tb_attn&attn_view=memory") and wait for the Attention
 * tab's app in its iframe; returns { tab, frame }. */
export async function openTab(page, hash) {
  await page.goto(`${TB}/${hash}`);
  const tab = page.locator("a, button, [role=tab]").filter({ hasText: /^\s*attention\s*$/i }).first();
  await tab.waitFor({ timeout: 60000 });
  await page.locator(FRAME).waitFor({ timeout: 60000 });
  const frame = page.frameLocator(FRAME);
  await frame.locator('[data-testid="attn-app"]').waitFor({ timeout: 60000 });
  return { tab, frame };
}

/** A README screenshot, taken only when SHOTS_DIR is set. */
export async function shot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.waitForTimeout(500); // let ECharts finish its first frame
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
  console.log(`screenshot ${name}.png`);
}

/** A script's checks in a fresh chromium: the closing check when they return, the failure when
 * they throw, and the browser closed either way. */
export async function run(checks, options = {}) {
  const { browser, close } = await launch(options);
  try {
    await checks(browser);
    finish();
  } catch (e) {
    fail(e);
  } finally {
    await close();
  }
}

/** Every chart legend of a view (data-legend, charts.describeLegend) lists only what its chart
 *  draws, each entry in a colour from colors.ts, and a name (a stage, an implementation, a run) has
 *  one colour on the whole page: its charts and the coloured dots of its tables (data-color). */
export async function checkLegends(view, pageName) {
  const charts = view.locator("[data-chart]");
  for (let i = 0; i < 200; i++) { // charts draw in the next animation frame; some pages add charts later
    const n = await charts.count();
    const drawn = await view.locator("[data-chart] canvas").count();
    if (n && drawn >= n) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const entries = await view.locator("[data-legend]").evaluateAll((els) => els.flatMap((e) =>
    JSON.parse(e.getAttribute("data-legend") || "[]").map((x) => ({ ...x, where: e.getAttribute("data-chart") }))));
  const dots = await view.locator("tr[data-run] .attn-dot[data-color]").evaluateAll((els) => els.map((e) => ({
    name: e.closest("tr").getAttribute("data-run"), color: e.getAttribute("data-color"), drawn: true, where: "table" })));
  const bad = [];
  const colorOf = new Map();
  for (const e of [...entries, ...dots]) {
    if (!e.drawn) bad.push(`${e.where}: "${e.name}" is in the legend but draws nothing`);
    if (!e.color) bad.push(`${e.where}: "${e.name}" has no colour of colors.ts (ECharts' palette)`);
    const was = colorOf.get(e.name);
    if (was && was.color !== e.color) bad.push(`"${e.name}" is ${was.color} in ${was.where} but ${e.color} in ${e.where}`);
    else if (!was) colorOf.set(e.name, e);
  }
  // Implementation badges: one family shade per implementation, its compiled variant included.
  const badges = await view.locator(".badge[data-impl]").evaluateAll((els) => els.map((e) => ({
    impl: e.getAttribute("data-impl").replace(/ compiled$/, ""), kind: [...e.classList].find((c) => c.startsWith("badge-")) })));
  const kindOf = new Map();
  for (const b of badges) {
    if (kindOf.has(b.impl) && kindOf.get(b.impl) !== b.kind) bad.push(`badge of ${b.impl} is ${kindOf.get(b.impl)} and ${b.kind}`);
    kindOf.set(b.impl, b.kind);
  }
  ok(entries.length > 0 && bad.length === 0,
    `${pageName}: ${entries.length} legend entries over ${await view.locator("[data-legend]").count()} charts, each drawn, one colour per name${bad.length ? `: ${bad.join("; ")}` : ""}`);
}

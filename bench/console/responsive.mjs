// responsive.mjs URL MEASURE_MS: how responsive the console's commands list stays while rows
// arrive, in headless Chromium (bench/console runs it; the read token comes in
// PROXBUS_BENCH_TOKEN and is sent as an Authorization header, never printed).
//
// It opens URL, waits for the page's live stream to be open, prints {"ready":true}, then for
// MEASURE_MS samples, in the page, the event loop's lag (a setInterval(…, 50) drift sampler),
// long tasks (PerformanceObserver "longtask"), gaps between animation frames and the time
// spent in the page's "rows" handler per update, while it clicks the id search field and
// types a letter once a second (Event Timing gives input → next paint). Then it clicks Filter
// with verb vm.start and times the filtered page's load. Last it prints one line of JSON
// (milliseconds throughout), with the renderer's main-thread time over the window by kind
// (Chrome DevTools Protocol Performance.getMetrics: task, script, layout, style).
//
// playwright-core is loaded from e2e/browser/node_modules, or from PROXBUS_PLAYWRIGHT_CORE.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const core = process.env.PROXBUS_PLAYWRIGHT_CORE || path.join(here, "..", "..", "e2e", "browser", "node_modules", "playwright-core");
const require = createRequire(path.join(here, "responsive.mjs"));
const { chromium } = require(core);

const [url, measureArg] = process.argv.slice(2);
const measureMs = Number(measureArg);
if (!url || !(measureMs > 0)) {
  console.error("usage: node responsive.mjs URL MEASURE_MS");
  process.exit(2);
}
const token = process.env.PROXBUS_BENCH_TOKEN;
// PROXBUS_BENCH_EXTRA_CSS, when set, is added to every page (the page's CSP bypassed): a way
// to try a style change of the console without changing it.
const extraCSS = process.env.PROXBUS_BENCH_EXTRA_CSS || "";
// PROXBUS_BENCH_TRACE, when set, is a file to write a Chromium trace of the window to (open
// it in DevTools' Performance panel or ui.perfetto.dev).
const traceFile = process.env.PROXBUS_BENCH_TRACE || "";
if (!token) {
  console.error("responsive.mjs: PROXBUS_BENCH_TOKEN is not set");
  process.exit(2);
}

// sampler runs in the page before its own script (it wraps EventSource listeners).
function sampler() {
  const b = { on: false, t0: 0, lag: [], frames: [], longTasks: [], updates: [], rowsApplied: 0, events: [] };
  const add = EventSource.prototype.addEventListener;
  EventSource.prototype.addEventListener = function (type, fn, opts) {
    if (type !== "rows") return add.call(this, type, fn, opts);
    return add.call(this, type, function (e) {
      const t = performance.now();
      fn.call(this, e);
      if (b.on) {
        b.updates.push(performance.now() - t);
        b.rowsApplied += (e.data.match(/"id":/g) || []).length;
      }
    }, opts);
  };
  b.start = () => {
    b.on = true;
    b.t0 = performance.now();
    let last = performance.now();
    b.timer = setInterval(() => {
      const now = performance.now();
      b.lag.push(Math.max(0, now - last - 50));
      last = now;
    }, 50);
    let lf = 0;
    const frame = (t) => {
      if (lf) b.frames.push(t - lf);
      lf = t;
      if (b.on) requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) if (b.on && e.startTime >= b.t0) b.longTasks.push(e.duration);
    }).observe({ type: "longtask" });
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) if (b.on && e.interactionId) b.events.push({ id: e.interactionId, d: e.duration });
    }).observe({ type: "event", durationThreshold: 16 });
  };
  b.stop = () => {
    b.on = false;
    clearInterval(b.timer);
    const perInteraction = new Map();
    for (const e of b.events) perInteraction.set(e.id, Math.max(perInteraction.get(e.id) || 0, e.d));
    const sorted = (xs) => [...xs].sort((x, y) => x - y);
    return {
      rows: document.getElementById("rows")?.rows.length || 0,
      lag: sorted(b.lag),
      longTasks: b.longTasks,
      frames: sorted(b.frames),
      updates: sorted(b.updates),
      rowsApplied: b.rowsApplied,
      slowInputs: sorted(perInteraction.values()),
      seconds: (performance.now() - b.t0) / 1000,
    };
  };
  window.__bench = b;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic"],
});
try {
  const context = await browser.newContext({
    extraHTTPHeaders: { Authorization: `Bearer ${token}` },
    viewport: { width: 1400, height: 900 },
    bypassCSP: extraCSS !== "",
  });
  await context.addInitScript(sampler);
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Performance.enable");
  const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
  page.setDefaultTimeout(120_000);
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector('#live[data-state="live"]');
  if (extraCSS) await page.addStyleTag({ content: extraCSS });
  const nav = await page.evaluate(() => {
    const n = performance.getEntriesByType("navigation")[0];
    return { domContentLoaded: n.domContentLoadedEventEnd, load: n.loadEventEnd };
  });
  await page.evaluate(() => window.__bench.start());
  const m0 = await metrics();
  if (traceFile) await browser.startTracing(page, { path: traceFile, screenshots: false });
  console.log(JSON.stringify({ ready: true }));

  const interactions = [];
  let inputs = 0;
  const end = Date.now() + measureMs;
  while (Date.now() < end) {
    const t = Date.now();
    await page.click("#f-q");
    await page.keyboard.type("x");
    interactions.push(Date.now() - t);
    inputs += 2;
    await sleep(Math.max(0, Math.min(1000 - (Date.now() - t), end - Date.now())));
  }
  const report = await page.evaluate(() => window.__bench.stop());
  const m1 = await metrics();
  if (traceFile) await browser.stopTracing();
  const spent = (name) => Math.round((m1[name] - m0[name]) * 1000); // seconds → ms
  const work = {
    task: spent("TaskDuration"), script: spent("ScriptDuration"),
    layout: spent("LayoutDuration"), style: spent("RecalcStyleDuration"),
    layouts: m1.LayoutCount - m0.LayoutCount, styles: m1.RecalcStyleCount - m0.RecalcStyleCount,
  };

  await page.fill("#f-q", "");
  await page.selectOption("#f-verb", "vm.start");
  const t = Date.now();
  await Promise.all([
    page.waitForURL(/verb=vm\.start/, { waitUntil: "load" }),
    page.click("form.filters button[type=submit]"),
  ]);
  const filterClick = Date.now() - t;
  const filterRows = await page.evaluate(() => document.querySelectorAll("#rows tr.cmd").length);

  interactions.sort((x, y) => x - y);
  console.log(JSON.stringify({ ...report, ...nav, work, inputs, interactions, filterClick, filterRows }));
} finally {
  await browser.close();
}

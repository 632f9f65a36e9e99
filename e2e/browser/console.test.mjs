// The proxbus web console in a real browser: Playwright drives Debian's Chromium through a
// running `proxbus dev`. e2e/console_browser_test.go starts dev, publishes a poison message
// and runs this file with:
//
//   PROXBUS_UI_URL                  the console, http://127.0.0.1:PORT/ui
//   PROXBUS_UI_TOKEN_FILE           the read token's file (as given to --ui-token-file)
//   PROXBUS_UI_OPERATOR_TOKEN_FILE  the operator token's file
//   PROXBUS_NATS_URL                dev's NATS, for `proxbus send`
//   PROXBUS_BIN                     the proxbus binary
//   PROXBUS_DLQ_SEQ                 the dead letter's sequence in the dead-letter stream
//   PROXBUS_DLQ_COMMAND_ID          the poison command's id (its 400 result is in the list)
//   PROXBUS_DLQ_CANARY              a password the poison message carried: never shown
//   PROXBUS_SCREENSHOT_DIR          where the screenshots go
//   PROXBUS_CHROMIUM                the browser (default /usr/bin/chromium)
//
// The steps run in order, one browser page throughout: a refused login, the reader's pages,
// then a logout, the operator's replay and the operator's decisions on commands awaiting approval. Every console error and uncaught exception of
// every page is collected and fails the last step.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, mkdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { chromium } from "playwright-core";

const run = promisify(execFile);

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through go test ./e2e -run TestConsoleInBrowser`);
  return v;
}

const ui = need("PROXBUS_UI_URL").replace(/\/+$/, "");
const natsURL = need("PROXBUS_NATS_URL");
const bin = need("PROXBUS_BIN");
const dlqSeq = need("PROXBUS_DLQ_SEQ");
const poisonID = need("PROXBUS_DLQ_COMMAND_ID");
const canary = need("PROXBUS_DLQ_CANARY");
const shots = need("PROXBUS_SCREENSHOT_DIR");
const readToken = (await readFile(need("PROXBUS_UI_TOKEN_FILE"), "utf8")).trim();
const operatorToken = (await readFile(need("PROXBUS_UI_OPERATOR_TOKEN_FILE"), "utf8")).trim();

// A run tag keeps the command ids of two runs against one dev apart.
const tag = Date.now().toString(36);
const liveID = `live-${tag}`;
const provisionID = `prov-${tag}`;

let userDataDir, context, page;

// Console errors and uncaught exceptions, of every page: [{where, text}].
const errors = [];
// allowed is the one console error a step expects (the refused login's 401), consumed once.
let allowed = null;

function watch(p) {
  p.on("console", (msg) => {
    if (msg.type() !== "error") return;
    const where = msg.location().url || p.url();
    if (allowed && allowed.text.test(msg.text()) && where === allowed.url) {
      allowed.seen++;
      if (allowed.seen === 1) return;
    }
    errors.push({ where, text: msg.text() });
  });
  p.on("pageerror", (err) => errors.push({ where: p.url(), text: `uncaught: ${err.message}` }));
}

before(async () => {
  userDataDir = await mkdtemp(path.join(tmpdir(), "proxbus-chromium-"));
  await mkdir(shots, { recursive: true });
  // launchPersistentContext is the way to give Chromium a user data dir of its own: a fresh
  // profile, nothing shared with another run.
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.PROXBUS_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
    viewport: { width: 1280, height: 800 },
    timeout: 30_000,
  });
  context.setDefaultTimeout(10_000);
  for (const p of context.pages()) watch(p);
  context.on("page", watch);
  page = context.pages()[0] ?? (await context.newPage());
});

after(async () => {
  await context?.close();
  if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
});

// send runs `proxbus send VERB` against dev; it resolves when the command exits 0.
async function send(verb, data, ...flags) {
  const args = ["send", verb, "--nats-url", natsURL, "--endpoint", "1", "--data", JSON.stringify(data), ...flags];
  try {
    return await run(bin, args, { timeout: 30_000 });
  } catch (err) {
    throw new Error(`proxbus ${args.join(" ")}: ${err.message}\n${err.stdout ?? ""}${err.stderr ?? ""}`);
  }
}

// open navigates to a console path and checks its status.
async function open(p, want = 200) {
  const resp = await page.goto(ui + p);
  assert.equal(resp.status(), want, `GET ${p}: status`);
  return resp;
}

// shot saves a full-page screenshot and checks a PNG came out.
async function shot(name) {
  const file = path.join(shots, name);
  await page.screenshot({ path: file, fullPage: true });
  const head = (await readFile(file)).subarray(0, 8);
  assert.deepEqual([...head], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], `${name} is not a PNG`);
  assert.ok((await stat(file)).size > 10_000, `${name} is nearly empty`);
}

// login submits the login form with token and returns the POST's response.
async function login(token) {
  await page.fill("#token", token);
  const [resp] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === "POST" && r.url() === `${ui}/login`),
    page.click('form[action="/ui/login"] button[type="submit"]'),
  ]);
  await page.waitForLoadState("load");
  return resp;
}

async function role() {
  return (await page.textContent("#role")).trim();
}

test("a wrong token is refused: 401, the error, no navigation and no data", async () => {
  await open("/login");
  allowed = { text: /^Failed to load resource: the server responded with a status of 401 \(Unauthorized\)$/, url: `${ui}/login`, seen: 0 };
  const resp = await login("not-the-token-" + tag);
  assert.equal(resp.status(), 401);
  assert.ok(await page.isVisible("#login-error"), "no #login-error");
  assert.match(await page.textContent("#login-error"), /not valid/);
  for (const sel of ["header nav", "#role", "#rows", "#live"]) {
    assert.equal(await page.locator(sel).count(), 0, `${sel} on the refused login page`);
  }
  assert.ok(!(await context.cookies(ui + "/")).some((c) => c.name === "proxbus_ui"), "a session cookie after a refused login");
  // Without a session every page is the login form: no command list, no data.
  const list = await context.request.get(`${ui}/commands`);
  assert.equal(list.status(), 401);
  assert.doesNotMatch(await list.text(), /id="rows"|<nav>/);
  console.log(`# the refused login logged ${allowed.seen} console error(s) of its 401`);
  allowed = null;
});

test("the reader logs in: an HttpOnly, SameSite=Strict session cookie", async () => {
  await open("/login");
  const resp = await login(readToken);
  assert.equal(resp.status(), 303);
  assert.equal(page.url(), `${ui}/commands`);
  assert.equal(await role(), "reader");
  const cookie = (await context.cookies(ui + "/")).find((c) => c.name === "proxbus_ui");
  assert.ok(cookie, "no session cookie");
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, "Strict");
  assert.ok(!cookie.value.includes(readToken), "the cookie holds the token");
  // The pages allow only the console's own script, style and connections, and no framing.
  const csp = (await context.request.get(`${ui}/commands`)).headers()["content-security-policy"] ?? "";
  for (const directive of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]) {
    assert.ok(csp.includes(directive), `Content-Security-Policy ${JSON.stringify(csp)}: no ${directive}`);
  }
});

test("the commands list shows a new command within a second, without a reload", async () => {
  await page.evaluate(() => { window.proxbusNoReload = true; });
  await send("vm.list", {}, "--no-wait", "--id", liveID);
  const sent = Date.now();
  await page.waitForSelector(`#c-${liveID}`, { timeout: 1000 });
  const seen = Date.now() - sent;
  assert.equal(await page.evaluate(() => window.proxbusNoReload), true, "the page was reloaded");
  assert.equal(await page.getAttribute("#live", "data-state"), "live", "the live badge");
  // The row changes in place when the command finishes.
  await page.waitForSelector(`#c-${liveID}[data-state="done"]`);
  assert.equal(await page.locator(`#c-${liveID} td.verb`).textContent(), "vm.list");
  console.log(`# ${liveID} in the list ${seen} ms after send returned`);
});

test("a provision's timeline: its steps in order, relocate_disk among them, and the result", async () => {
  // Commands of several verbs and outcomes, for the list's screenshot.
  await send("vm.provision", {
    source: { template_vmid: 8000 }, new_vmid: 330, new_name: "demo-330",
    target_node: "pve2", storage: "local-lvm", memory_mb: 2048,
  }, "--id", provisionID);
  await send("vm.snapshot.list", { vm: 101 }, "--id", `snaps-${tag}`);
  await send("vm.start", { vm: 330 }, "--id", `start-${tag}`);
  await page.waitForSelector(`#c-${provisionID}[data-state="done"]`);
  await page.waitForSelector(`#c-start-${tag}[data-state="done"]`);
  await page.waitForSelector(`#c-${poisonID}[data-state="failed"]`);
  // The target column names the guest and node; a reason is shown whole, not cut.
  assert.match(await page.textContent(`#c-start-${tag} td.target`), /^VM 330\b/);
  assert.match(await page.textContent(`#c-${provisionID} td.target`), /^VM 330\b/);
  await run(bin, ["send", "vm.start", "--nats-url", natsURL, "--endpoint", "2", "--data", '{"vm":101}', "--no-wait", "--id", `ro-${tag}`]);
  await page.waitForSelector(`#c-ro-${tag}[data-state="failed"]`);
  const reason = page.locator(`#c-ro-${tag} td.status .reason`);
  assert.equal((await reason.textContent()).trim(), "endpoint_writes_disabled");
  const fit = await reason.evaluate((el) => {
    const td = el.closest("td"), cell = td.getBoundingClientRect(), r = el.getBoundingClientRect();
    return { cell: td.clientWidth, content: td.scrollWidth, overhang: r.right - cell.right };
  });
  assert.ok(fit.content <= fit.cell && fit.overhang <= 0, `the reason is cut: ${JSON.stringify(fit)}`);
  await shot("commands.png");

  await page.click(`#c-${provisionID} td.id a`);
  await page.waitForURL(`${ui}/commands/${provisionID}`);
  const bars = await page.$$eval(".bar-row", (rows) => rows.map((r) => ({ step: r.dataset.step, status: r.dataset.status })));
  const steps = bars.map((b) => b.step);
  const want = ["storage_inventory", "import_image", "clone_template", "relocate_disk", "configure_cloud_init", "resize_disk", "start_vm"];
  let at = -1;
  for (const s of want) {
    const i = steps.indexOf(s, at + 1);
    assert.ok(i > at, `timeline ${JSON.stringify(steps)}: ${s} missing or out of order (want ${want.join(", ")})`);
    at = i;
  }
  assert.equal(bars.find((b) => b.step === "relocate_disk").status, "done");
  assert.equal(bars.find((b) => b.step === "start_vm").status, "done");
  assert.match(await page.textContent("#result"), /201 created/);
  assert.equal(await page.locator("#reason").count(), 0, "a reason on a success");
  // The journal link opens NetBox's page of the entry, not its API.
  const journal = await page.getAttribute("#journal", "href");
  assert.match(journal, /\/extras\/journal-entries\/\d+\/$/);
  assert.doesNotMatch(journal, /\/api\//);
  await shot("command-timeline.png");

  // A failed command's page names its reason.
  await open(`/commands/${poisonID}`);
  assert.match(await page.textContent("#result"), /400 refused/);
  assert.equal((await page.textContent("#reason")).trim(), "invalid_command");
});

test("the reader sees the dead letter but cannot replay it", async () => {
  await open("/deadletters");
  assert.equal(await page.locator(`#dl-${dlqSeq}`).count(), 1, `no dead letter ${dlqSeq} in the list`);
  assert.equal(await page.locator("#purge").count(), 0, "the reader is offered #purge");
  await page.click(`#dl-${dlqSeq} a`);
  await page.waitForURL(`${ui}/deadletters/${dlqSeq}`);
  assert.equal(await page.locator("#replay").count(), 0, "the reader is offered #replay");
  const body = await page.content();
  assert.ok(!body.includes(canary), "the dead letter's page shows the password it carried");
  assert.match(body, /proxbus\.cmd\.vm\.start/);

  // Asked directly, both halves of the replay are refused, even with a valid CSRF token.
  const csrf = await page.inputValue('form[action="/ui/logout"] input[name="csrf"]');
  const replayURL = `${ui}/deadletters/${dlqSeq}/replay`;
  const get = await context.request.get(replayURL, { maxRedirects: 0 });
  assert.equal(get.status(), 403, "the reader's GET of the replay page");
  assert.match(await get.text(), /Operators only/);
  const post = await context.request.post(replayURL, { form: { csrf }, maxRedirects: 0 });
  assert.equal(post.status(), 403, "the reader's POST of a replay");
  const purge = await context.request.post(`${ui}/deadletters/purge`, { form: { csrf, before: new Date().toISOString() }, maxRedirects: 0 });
  assert.equal(purge.status(), 403, "the reader's purge");
  await page.reload();
  assert.equal(await page.locator("ul.replays").count(), 0, "the reader's POST replayed the letter");
});

test("the operator replays the dead letter: Replay…, confirm, replayed", async () => {
  await page.click('form[action="/ui/logout"] button[type="submit"]');
  await page.waitForURL(`${ui}/login`);
  assert.equal(await page.locator("#role").count(), 0);
  const resp = await login(operatorToken);
  assert.equal(resp.status(), 303);
  assert.equal(await role(), "operator");

  await open("/deadletters");
  assert.equal(await page.locator("#purge").count(), 1, "the operator is not offered #purge");
  await open(`/deadletters/${dlqSeq}`);
  // A POST without the form's CSRF token is refused, whoever sends it.
  const forged = await context.request.post(`${ui}/deadletters/${dlqSeq}/replay`, { form: {}, maxRedirects: 0 });
  assert.equal(forged.status(), 403, "a replay without the CSRF token");

  await page.click("#replay");
  await page.waitForURL(`${ui}/deadletters/${dlqSeq}/replay`);
  assert.doesNotMatch(await page.textContent("main"), /time\(s\) before/, "replayed before the operator confirmed");
  await page.click("button#confirm");
  await page.waitForURL((u) => u.pathname === `/ui/deadletters/${dlqSeq}` && u.searchParams.has("replayed"));
  assert.ok(await page.isVisible("#replayed"), "no #replayed");
  assert.match(await page.textContent("#replayed"), new RegExp(`${poisonID}-replay-${dlqSeq}`));
  assert.equal(await page.locator("ul.replays li").count(), 1);
  await shot("deadletter.png");
});

// decide opens command id's page as the operator, clicks the decision's button, gives reason
// on the confirmation page, confirms, and waits for the command to reach state.
async function decide(id, action, reason, state) {
  await open(`/commands/${id}`);
  await page.waitForSelector(`#${action}`); // live: the buttons come with the approval wait
  await page.click(`#${action}`);
  await page.waitForURL(`${ui}/commands/${id}/${action}`);
  if (reason) await page.fill("textarea#reason", reason);
  await page.click("button#confirm");
  await page.waitForURL((u) => u.pathname === `/ui/commands/${id}` && u.searchParams.get("sent") === `command.${action}`);
  assert.match(await page.textContent("#sent"), new RegExp(`command\\.${action} published as`));
  await page.waitForSelector(`#state [data-state="${state}"]`, { timeout: 30_000 });
  for (const b of ["approve", "reject", "cancel"]) {
    assert.equal(await page.locator(`#${b}`).count(), 0, `an answered command (${state}) still offers #${b}`);
  }
}

test("the operator approves, rejects and cancels commands awaiting approval; the reader cannot", async () => {
  const [rej, appr, can] = [`reject-${tag}`, `approve-${tag}`, `cancel-${tag}`];
  await send("node.reboot", { node: "pve3" }, "--no-wait", "--id", rej);
  await send("vm.delete", { vm: 330, stop_first: true }, "--no-wait", "--id", appr);
  await send("node.reboot", { node: "pve2" }, "--no-wait", "--id", can);
  await open(`/commands/${rej}`);
  await page.waitForSelector(`#state [data-state="awaiting_approval"]`);
  await page.waitForSelector("#reject");
  await shot("command-approval.png");

  // The reader (a bearer token, no cookie) gets no button, and 403 for both halves.
  const asReader = { headers: { Authorization: `Bearer ${readToken}` } };
  const readerPage = await (await fetch(`${ui}/commands/${rej}`, asReader)).text();
  assert.match(readerPage, /data-state="awaiting_approval"/);
  assert.doesNotMatch(readerPage, /id="(approve|reject|cancel)"/, "the reader is offered a decision");
  for (const a of ["approve", "reject", "cancel"]) {
    const get = await fetch(`${ui}/commands/${rej}/${a}`, asReader);
    assert.equal(get.status, 403, `the reader's GET of ${a}`);
    const post = await fetch(`${ui}/commands/${rej}/${a}`, { method: "POST", headers: { ...asReader.headers, "Content-Type": "application/x-www-form-urlencoded" }, body: "reason=x", redirect: "manual" });
    assert.equal(post.status, 403, `the reader's POST of ${a}`);
  }
  // Without the form's CSRF token the operator's POST is refused too.
  const forged = await context.request.post(`${ui}/commands/${rej}/reject`, { form: { reason: "forged" }, maxRedirects: 0 });
  assert.equal(forged.status(), 403, "a rejection without the CSRF token");

  await decide(rej, "reject", "not during office hours <b>", "rejected");
  assert.match(await page.textContent("#result"), /403 refused/);
  assert.equal((await page.textContent("#reason")).trim(), "approval_rejected");
  await decide(appr, "approve", "", "done");
  await decide(can, "cancel", "maintenance moved", "cancelled");
  assert.equal((await page.textContent("#reason")).trim(), "command_cancelled");
  await open("/commands");
  assert.equal(await page.getAttribute(`#c-${rej}`, "data-state"), "rejected");
  assert.equal(await page.getAttribute(`#c-${can}`, "data-state"), "cancelled");
  assert.doesNotMatch(await page.textContent(`#c-${rej} td.where`), /approval/, "a rejected command still shows its approval wait");
});

test("the other pages: repairs, approvals, replicas", async () => {
  await open("/repairs");
  assert.match(await page.textContent("h1"), /Pending journal repairs/);
  await open("/approvals");
  assert.match(await page.textContent("h1"), /Awaiting approval/);
  await open("/replicas");
  await page.waitForSelector('#live[data-state="live"]');
  const instances = await page.$$eval("#replicas tbody tr td:first-child", (tds) => tds.map((td) => td.textContent.trim()));
  assert.ok(instances.includes("dev"), `replicas ${JSON.stringify(instances)}: no dev`);
  await shot("replicas.png");
});

test("no page logged a console error or threw", () => {
  assert.equal(allowed, null);
  assert.deepEqual(errors, [], "console errors:\n" + errors.map((e) => `  ${e.where}: ${e.text}`).join("\n"));
});

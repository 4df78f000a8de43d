// Drives headless Chromium through forewarn's two pages as a person would: on the simulator
// console, generate a Reboot; on the daemon's status page, wait for the plugins' decisions
// and the approval; then check the console's request list shows the approval POST.
// Saves screenshots and prints one JSON object (what the pages showed) for
// host/tests/e2e_pages.rs to assert on. Then a Redeploy far ahead shows its time left, and
// canceling it with the console's button moves it to the status page's past events. Every request outside loopback is refused and reported.
//
// Inputs (environment): FOREWARN_CHROMIUM (the browser), FOREWARN_CONSOLE_URL,
// FOREWARN_STATUS_URL, FOREWARN_SCREENSHOT_DIR, FOREWARN_NOT_BEFORE_SECONDS, FOREWARN_WAIT_MS.
//
// With FOREWARN_FLEET_VMS=N (host/tests/e2e_fleet_view.rs), only the status page's fleet
// section: it waits for N VMs (and for FOREWARN_FLEET_GONE, when set, shown gone) and prints
// each row's VM, state, stage and holders; no console.
//
// With FOREWARN_OUTCOMES=N (host/tests/e2e_outcome.rs), only the status page's outcome
// records: it waits for N finished ones and prints what each drawing shows (the announced
// window, the measured impact and their widths in the SVG, the verdict and the legend);
// screenshot FOREWARN_OUTCOMES_SCREENSHOT (default outcomes.png) of that section.
//
// With FOREWARN_UNREACHABLE=1 (host/tests/e2e_pages.rs), only the status page's banner for a
// daemon that stops answering: once the page has drawn the daemon's status it prints the
// line `drawn` (with what #waiting said), and waits for the test to stop the daemon; then
// for the banner; then prints one JSON object (the banner's text before and after).
import puppeteer from 'puppeteer-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    console.error(`pages.mjs: ${name} is not set (host/tests/e2e_pages.rs sets it)`);
    process.exit(2);
  }
  return value;
};

const chromium = env('FOREWARN_CHROMIUM');
const fleetVms = process.env.FOREWARN_FLEET_VMS;
const statusUrl = env('FOREWARN_STATUS_URL');
const screenshotDir = env('FOREWARN_SCREENSHOT_DIR');
const waitMs = Number(env('FOREWARN_WAIT_MS'));
mkdirSync(screenshotDir, { recursive: true });

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const outside = [];
const pageErrors = [];

/** A page that may only load from loopback (the pages promise no external assets). */
async function openPage(browser, viewport) {
  const page = await browser.newPage();
  await page.setViewport(viewport);
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.protocol === 'data:' || LOOPBACK.has(url.hostname)) {
      request.continue();
      return;
    }
    outside.push(request.url());
    request.abort();
  });
  page.on('pageerror', (error) => pageErrors.push(`${page.url()}: ${error.message}`));
  return page;
}

/** Waits for `selector`; on timeout, says which page lacked what. */
async function waitFor(page, selector, what) {
  try {
    return await page.waitForSelector(selector, { timeout: waitMs });
  } catch (error) {
    const name = `failed-${what.replace(/[^a-z0-9]+/gi, '-')}.png`;
    await page.screenshot({ path: join(screenshotDir, name), fullPage: true }).catch(() => {});
    throw new Error(`${page.url()}: ${what}: no ${selector} within ${waitMs} ms (screenshot ${name}): ${error.message}`);
  }
}

/** Fills the console's generate form and clicks Generate. */
async function generate(page, type, notBefore) {
  await page.bringToFront();
  await page.select('#generate-form select[name=type]', type);
  await page.$eval('#generate-form input[name=not-before-seconds]', (input, value) => {
    input.value = value;
  }, notBefore);
  await page.click('#generate');
}

const attributes = (element, names) =>
  element.evaluate((node, names) => Object.fromEntries(names.map((name) => [name, node.getAttribute(name)])), names);

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  // --no-sandbox: test machines run as root, where Chromium's sandbox refuses to start.
  // The others: pages in background tabs keep running their timers and animation frames
  // (puppeteer's click waits for one), as the page in front does.
  args: [
    '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
    '--disable-backgrounding-occluded-windows',
  ],
});
const desktop = { width: 1280, height: 900 };

/** The fleet section: N rows, the gone VM marked; what each row shows. */
async function fleetSeen() {
  const status = await openPage(browser, desktop);
  await status.goto(statusUrl, { waitUntil: 'load' });
  const count = Number(fleetVms);
  try {
    await status.waitForFunction((count) => document.querySelectorAll('#fleet:not([hidden]) [data-fleet-vm]').length >= count, { timeout: waitMs }, count);
  } catch (error) {
    await status.screenshot({ path: join(screenshotDir, 'failed-fleet.png'), fullPage: true }).catch(() => {});
    throw new Error(`${statusUrl}: no ${count} VMs in the fleet section within ${waitMs} ms: ${error.message}`);
  }
  const gone = process.env.FOREWARN_FLEET_GONE;
  if (gone) await waitFor(status, `#fleet [data-fleet-vm="${gone}"][data-fleet-state="gone"]`, `${gone} shown gone`);
  const rows = await status.$$eval('#fleet [data-fleet-vm]', (nodes) => nodes.map((node) => ({
    vm: node.getAttribute('data-fleet-vm'),
    state: node.getAttribute('data-fleet-state'),
    stage: node.getAttribute('data-fleet-stage'),
    health: node.getAttribute('data-fleet-health'),
    health_reasons: [...node.querySelectorAll('[data-health-reason]')].map((reason) => reason.getAttribute('data-health-reason')),
    holders: [...node.querySelectorAll('[data-holder]')].map((holder) => holder.getAttribute('data-holder')),
    text: node.textContent,
  })));
  const barrier = await status.$$eval('#coordination:not([hidden]) [data-barrier]', (nodes) => nodes.map((node) => ({
    event: node.getAttribute('data-barrier'),
    cells: [...node.querySelectorAll('td')].map((cell) => cell.textContent),
  })));
  // The disruption budget's box, when the daemon keeps one (null otherwise).
  const budget = await status.$eval('#fleet-budget', (node) => node.hidden ? null : ({
    in_use: Number(node.querySelector('[data-budget-in-use]')?.getAttribute('data-budget-in-use')),
    slots: Number(node.querySelector('[data-budget-slots]')?.getAttribute('data-budget-slots')),
    holders: [...node.querySelectorAll('[data-budget-holder]')].map((holder) => holder.getAttribute('data-budget-holder')),
    waiting: [...node.querySelectorAll('[data-budget-waiting]')].map((waiting) => waiting.getAttribute('data-budget-waiting')),
    text: node.textContent,
  }));
  const shot = process.env.FOREWARN_FLEET_SCREENSHOT || (gone ? 'fleet-gone.png' : 'fleet.png');
  await status.screenshot({ path: join(screenshotDir, shot), fullPage: true });
  return { rows, barrier, budget, outside_requests: outside, page_errors: pageErrors };
}

/** The outcome records' section: N finished records, each drawing read back. */
async function outcomesSeen() {
  const status = await openPage(browser, desktop);
  await status.goto(statusUrl, { waitUntil: 'load' });
  const count = Number(process.env.FOREWARN_OUTCOMES);
  await waitFor(status, `#outcomes article[data-stage="finished"]:nth-of-type(${count})`, `${count} finished outcome records`);
  const records = await status.$$eval('#outcomes article[data-outcome-event-id]', (nodes) => nodes.map((node) => {
    const width = (element) => element ? Number(element.getAttribute('width')) : null;
    const drawings = [...node.querySelectorAll('svg')].map((svg) => {
      const announced = svg.querySelector('[data-announced-ms]');
      const measured = svg.querySelector('[data-measured-ms]');
      return {
        zoomed: svg.hasAttribute('data-zoomed'),
        from: Number(svg.getAttribute('data-from')),
        to: Number(svg.getAttribute('data-to')),
        announced_ms: announced ? Number(announced.getAttribute('data-announced-ms')) : null,
        announced_width: width(announced),
        measured_ms: measured ? Number(measured.getAttribute('data-measured-ms')) : null,
        impact: measured ? measured.getAttribute('data-impact') : null,
        measured_width: width(measured),
        not_befores: svg.querySelectorAll('[data-not-before]').length,
        approved: svg.querySelector('[data-approved]') !== null,
        // The viewBox's width against the drawn width: the ratio that turns SVG units into pixels.
        view_width: svg.viewBox.baseVal.width,
        pixel_width: svg.getBoundingClientRect().width,
      };
    });
    return {
      event_id: node.getAttribute('data-outcome-event-id'),
      event_type: node.getAttribute('data-event-type'),
      stage: node.getAttribute('data-stage'),
      verdict: node.querySelector('[data-verdict]').textContent,
      legend: node.querySelector('[data-legend]').textContent,
      drawings,
    };
  }));
  const external = await status.$$eval('#outcomes svg image, #outcomes svg use', (nodes) => nodes.length);
  const section = await status.$('#outcomes');
  const shot = process.env.FOREWARN_OUTCOMES_SCREENSHOT || 'outcomes.png';
  await section.screenshot({ path: join(screenshotDir, shot) });
  return { records, external_references: external, outside_requests: outside, page_errors: pageErrors };
}

/** The console and the status page, as the module comment says. */
async function consoleAndStatusSeen() {
  const consoleUrl = env('FOREWARN_CONSOLE_URL');
  const notBeforeSeconds = env('FOREWARN_NOT_BEFORE_SECONDS');
  const simulator = await openPage(browser, desktop);
  await simulator.goto(consoleUrl, { waitUntil: 'load' });
  await waitFor(simulator, '#scenario-name', 'the console shows the scenario');

  // Generate a Reboot with the chosen notice, as a person would with the form.
  await generate(simulator, 'Reboot', notBeforeSeconds);
  const consoleEvent = await waitFor(simulator, '[data-event-id][data-event-type="Reboot"]', 'the generated Reboot on the console');
  const eventId = await consoleEvent.evaluate((node) => node.getAttribute('data-event-id'));

  // The status page: the plugins' decisions and the approval, live.
  const status = await openPage(browser, desktop);
  await status.goto(statusUrl, { waitUntil: 'load' });
  const eventSelector = `#events [data-event-id="${eventId}"]`;
  await waitFor(status, eventSelector, 'the event on the status page');
  await waitFor(status, `${eventSelector}[data-approval="sent"]`, 'the approval on the status page');
  // The history is recorded as the daemon works: wait for the answers the test reads.
  await waitFor(status, `${eventSelector} [data-call][data-plugin="drain"][data-decision="approve"]`, "drain's approval in the timeline");
  await waitFor(status, `${eventSelector} [data-call][data-plugin="notify"][data-decision="approve"]`, "notify's approval in the timeline");
  const calls = [];
  for (const call of await status.$$(`${eventSelector} [data-call]`)) {
    calls.push(await attributes(call, ['data-plugin', 'data-phase', 'data-decision']));
  }
  const plugins = await status.$$eval('#plugins [data-plugin-name]', (nodes) => nodes.map((node) => node.getAttribute('data-plugin-name')));
  const ready = await status.$eval('#readiness', (node) => node.getAttribute('data-ready'));
  const fleetHidden = await status.$eval('#fleet', (node) => node.hidden);

  // A Redeploy two hours ahead waits for the prepare lead time: the page counts down to it.
  await generate(simulator, 'Redeploy', '7200');
  const waiting = await waitFor(simulator, '[data-event-id][data-event-type="Redeploy"]', 'the generated Redeploy on the console');
  const waitingId = await waiting.evaluate((node) => node.getAttribute('data-event-id'));
  const waitingSelector = `#events [data-event-id="${waitingId}"]`;
  await waitFor(status, `${waitingSelector} [data-time-left]`, 'the waiting Redeploy on the status page');
  const timeLeft = await status.$eval(`${waitingSelector} [data-time-left]`, (node) => node.textContent.trim());
  await status.screenshot({ path: join(screenshotDir, 'status-page.png'), fullPage: true });

  // The console lists the approval POST IMDS received, with its body.
  const post = await waitFor(simulator, '#requests [data-request][data-method="POST"]', 'the approval POST on the console');
  const postText = await post.evaluate((node) => node.textContent);
  const postStatus = await post.evaluate((node) => node.getAttribute('data-status'));
  const documentText = await simulator.$eval('#document', (node) => node.textContent);
  await simulator.screenshot({ path: join(screenshotDir, 'simulator-console.png'), fullPage: true });

  // Cancel the Redeploy with the console's button: the status page moves it to the past.
  await simulator.bringToFront();
  await simulator.click(`[data-event-id="${waitingId}"] button[data-action="cancel"]`);
  await waitFor(status, `#past-events [data-past-event-id="${waitingId}"]`, 'the canceled Redeploy among the past events');

  // Readable on a phone: the status page at a phone's width, without sideways scrolling.
  const phone = await openPage(browser, { width: 390, height: 844, isMobile: true, deviceScaleFactor: 2 });
  await phone.goto(statusUrl, { waitUntil: 'load' });
  await waitFor(phone, eventSelector, 'the event on the phone-sized status page');
  const phoneOverflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await phone.screenshot({ path: join(screenshotDir, 'status-page-phone.png'), fullPage: true });

  return {
    event_id: eventId,
    calls,
    plugins,
    ready,
    time_left: timeLeft,
    waiting_event_id: waitingId,
    approval_post: { text: postText, status: postStatus },
    document: documentText,
    phone_overflow_px: phoneOverflow,
    fleet_hidden: fleetHidden,
    outside_requests: outside,
    page_errors: pageErrors,
  };
}

/** The status page while its daemon answers, then after the test has stopped it. */
async function unreachableSeen() {
  const status = await openPage(browser, desktop);
  await status.goto(statusUrl, { waitUntil: 'load' });
  // Drawn from a /status answer: the readiness and the time it was generated.
  await waitFor(status, '#readiness[data-ready]', 'the daemon\'s readiness on the status page');
  await status.waitForFunction(() => document.querySelector('#generated-at').textContent.trim() !== '', { timeout: waitMs });
  const before = await status.$eval('#waiting', (node) => node.textContent);
  console.log(`drawn ${JSON.stringify(before)}`);
  // The test stops the daemon now: the page's next refreshes get no answer.
  try {
    await status.waitForFunction(() => /does not answer/.test(document.querySelector('#waiting').textContent), { timeout: waitMs });
  } catch (error) {
    await status.screenshot({ path: join(screenshotDir, 'failed-unreachable.png'), fullPage: true }).catch(() => {});
    const text = await status.$eval('#waiting', (node) => node.textContent).catch(() => '?');
    throw new Error(`${statusUrl}: no "does not answer" in #waiting within ${waitMs} ms of the daemon's stop (it says ${JSON.stringify(text)}): ${error.message}`);
  }
  const banner = await status.$eval('#waiting', (node) => node.textContent);
  const role = await status.$eval('#waiting', (node) => node.getAttribute('role'));
  await status.screenshot({ path: join(screenshotDir, 'status-page-unreachable.png'), fullPage: true });
  return { before, banner, role, outside_requests: outside, page_errors: pageErrors };
}

let exitCode = 0;
try {
  const seen = process.env.FOREWARN_UNREACHABLE
    ? await unreachableSeen()
    : process.env.FOREWARN_OUTCOMES ? await outcomesSeen()
    : fleetVms ? await fleetSeen() : await consoleAndStatusSeen();
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`pages.mjs: ${error.message}`);
  exitCode = 1;
} finally {
  await browser.close();
}
process.exit(exitCode);

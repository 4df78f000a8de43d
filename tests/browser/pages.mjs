// Drives headless Chromium through forewarn's two pages as a person would: on the simulator
// console, generate a Reboot; on the daemon's status page, wait for the plugins' decisions
// and the approval; then check the console's request list shows the approval POST.
// Saves screenshots and prints one JSON object (what the pages showed) for
// host/tests/e2e_pages.rs to assert on. Then a Redeploy far ahead shows its time left, and
// canceling it with the console's button moves it to the status page's past events. Every request outside loopback is refused and reported.
//
// Inputs (environment): FOREWARN_CHROMIUM (the browser), FOREWARN_CONSOLE_URL,
// FOREWARN_STATUS_URL, FOREWARN_SCREENSHOT_DIR, FOREWARN_NOT_BEFORE_SECONDS, FOREWARN_WAIT_MS.
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
const consoleUrl = env('FOREWARN_CONSOLE_URL');
const statusUrl = env('FOREWARN_STATUS_URL');
const screenshotDir = env('FOREWARN_SCREENSHOT_DIR');
const notBeforeSeconds = env('FOREWARN_NOT_BEFORE_SECONDS');
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
let exitCode = 0;
try {
  const desktop = { width: 1280, height: 900 };
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

  console.log(JSON.stringify({
    event_id: eventId,
    calls,
    plugins,
    ready,
    time_left: timeLeft,
    waiting_event_id: waitingId,
    approval_post: { text: postText, status: postStatus },
    document: documentText,
    phone_overflow_px: phoneOverflow,
    outside_requests: outside,
    page_errors: pageErrors,
  }));
} catch (error) {
  console.error(`pages.mjs: ${error.message}`);
  exitCode = 1;
} finally {
  await browser.close();
}
process.exit(exitCode);

// The dashboard in real headless Chromium (puppeteer-core), against the live daemon that
// tests/e2e/t-browser.sh started (system mode, fake NVML, users A and B). Every check waits for
// a condition with a deadline; a failure prints what the page showed and exits 1.
//
// Environment (from t-browser.sh): DASHBOARD_URL, TOKEN_A, USER_A, USER_B, B_TASK (B's running
// task), AS_A (runs a command as A), WORK_A (A's working directory), EXPERIMENT (a finished sweep
// of A's), FAKE_NVML_STATE (rewritten here so the charts move), SCREENSHOTS (directory), DOCS
// (docs/, for dashboard.png when DROVER_UPDATE_SCREENSHOT=1), CHROMIUM, DROVER (the CLI).
import { execFileSync } from 'node:child_process';
import { renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const env = process.env;
const url = env.DASHBOARD_URL;
const shots = env.SCREENSHOTS;
let checks = 0;

function check(name) { checks++; console.log(`--- browser: ${name}`); }

function fail(message) { throw new Error(message); }

// Runs the drover CLI as A; returns its stdout, trimmed.
function asA(...args) {
  return execFileSync(env.AS_A, [env.DROVER, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}
function stateOf(id) {
  return JSON.parse(execFileSync(env.DROVER, ['show', String(id), '--json'], { encoding: 'utf8' })).state;
}

// The fake NVML's state, with utilisation, memory, temperature and power moving with time (the
// charts get shape). GPU 1 stays below the daemon's busy threshold (busy-high, 80%) and uses no
// memory outside the claims, so that A's tasks can start on it.
function writeNvml() {
  const t = Date.now() / 1000;
  const u0 = Math.round(45 + 30 * Math.sin(t / 3));
  const u1 = Math.round(20 + 15 * Math.cos(t / 4));
  const text = [
    `gpu 0 name="Fake H100" uuid=GPU-fake-0 mem_total=16G mem_used=${4 + (u0 >> 3)}G util=${u0} mem_util=${u0 >> 1} temp=${40 + (u0 >> 2)} power=${100000 + u0 * 3000} ecc=0`,
    `gpu 1 name="Fake H100" uuid=GPU-fake-1 mem_total=16G mem_used=0 util=${u1} mem_util=${u1 >> 1} temp=${35 + (u1 >> 2)} power=${60000 + u1 * 2500} ecc=0`,
  ].join('\n') + '\n';
  writeFileSync(`${env.FAKE_NVML_STATE}.tmp`, text);
  renameSync(`${env.FAKE_NVML_STATE}.tmp`, env.FAKE_NVML_STATE);
}

// waitFor(page, fn, args, what, ms): polls fn in the page until it returns truthy.
async function waitFor(page, fn, args, what, ms = 20000) {
  try {
    return await page.waitForFunction(fn, { timeout: ms, polling: 100 }, ...args);
  } catch {
    const text = await page.evaluate(() => document.body.innerText.slice(0, 1500)).catch(() => '?');
    fail(`timed out after ${ms / 1000}s waiting for: ${what}\n--- page text ---\n${text}`);
  }
}

// Painted pixels (non-transparent) of every canvas under selector: one count per canvas.
async function paintedPixels(page, selector) {
  return page.$$eval(`${selector} canvas`, (canvases) => canvases.map((c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) n++;
    return n;
  }));
}

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${name}.png`) });
}

const consoleErrors = [];
const expectedErrors = [];   // network errors the test provokes on purpose (401 before login, 403)
const nvmlTimer = setInterval(writeNvml, 1000);
writeNvml();
const browser = await puppeteer.launch({
  executablePath: env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let status = 0;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(`console: ${msg.text()} (${msg.location()?.url || ''})`);
  });
  page.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`));
  page.on('requestfailed', (r) => {
    if (!r.url().includes('/api/v1/events') && !r.url().includes('/logs')) consoleErrors.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) expectedErrors.push(`${r.status()} ${r.request().method()} ${r.url()}`);
  });

  check('the page asks for a token, and logs in with A\'s');
  await page.goto(`${url}/`, { waitUntil: 'load' });
  const csp = (await page.evaluate(async () => (await fetch('/')).headers.get('content-security-policy'))) || '';
  if (!csp.includes("default-src 'self'")) fail(`the page is served without its Content-Security-Policy: '${csp}'`);
  await page.waitForSelector('#login #token', { timeout: 10000 });
  if (!(await page.$eval('#nav', (el) => el.hidden))) fail('the navigation shows before login');
  await shot(page, 'login');
  await page.type('#token', env.TOKEN_A);
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#queue tbody tr[data-id]', { timeout: 15000 });
  const who = await page.$eval('#who', (el) => el.textContent);
  if (!who.includes(env.USER_A)) fail(`the header shows '${who}', not ${env.USER_A}`);
  await page.evaluate(() => { window.__sameDocument = true; });

  check('B\'s task is listed without buttons for A');
  await waitFor(page, (id) => document.querySelector(`#queue tr[data-id="${id}"]`), [env.B_TASK], `B's task ${env.B_TASK} in the queue`);
  const bButtons = await page.$$eval(`#queue tr[data-id="${env.B_TASK}"] button`, (b) => b.length);
  if (bButtons !== 0) fail(`B's task shows ${bButtons} buttons to A`);

  check('a task submitted after the page loaded appears, and its state changes live');
  // A shared claim: GPU 0 holds 2G of memory no task of drover's uses (the fake NVML's state),
  // which keeps a whole-GPU task off it once a sample has seen that; a claim fits beside it.
  const live = asA('submit', '--gpus', '1', '--gpu-mem', '4G', '--name', 'live-one', '--', 'sh', '-c',
    'echo "hello from the dashboard test"; while [ ! -f go ]; do sleep 0.1; done; echo finished');
  await waitFor(page, (id) => document.querySelector(`#queue tr[data-id="${id}"][data-state="running"]`), [live],
    `task ${live} running in the queue`);
  const queued = asA('submit', '--gpus', '1', '--name', 'waits-for-a-gpu', '--', 'sleep', '300');
  await waitFor(page, (id) => document.querySelector(`#queue tr[data-id="${id}"][data-state="queued"]`), [queued],
    `task ${queued} queued in the queue`);
  await shot(page, 'queue');

  check('cancel from the page');
  await page.click(`#queue tr[data-id="${queued}"] button[data-act="cancel"]`);
  await waitFor(page, (id) => document.querySelector(`#queue tr[data-id="${id}"][data-state="cancelled"]`), [queued],
    `task ${queued} shown cancelled`);
  if (stateOf(queued) !== 'cancelled') fail(`task ${queued} is ${stateOf(queued)} after the page cancelled it`);
  // The row is redrawn from the daemon's answer: an ended task offers retry, not cancel.
  await waitFor(page, (id) => document.querySelector(`#queue tr[data-id="${id}"] button[data-act="retry"]`) &&
    !document.querySelector(`#queue tr[data-id="${id}"] button[data-act="cancel"]`), [queued],
    `task ${queued}'s buttons redrawn for its new state`);

  check('the live task ends: its row changes without a reload');
  writeFileSync(join(env.WORK_A, 'go'), '');
  await waitFor(page, (id) => document.querySelector(`#queue tr[data-id="${id}"][data-state="succeeded"]`), [live],
    `task ${live} shown succeeded`);
  if (!(await page.evaluate(() => window.__sameDocument === true))) fail('the page was reloaded');
  await waitFor(page, (id) => document.querySelector(`#queue tr[data-id="${id}"] button[data-act="retry"]`), [live],
    `task ${live}'s row redrawn with a retry button`);

  check('cancelling B\'s task is refused, and the page says so');
  // A page whose buttons are out of date (or tampered with): the daemon decides, the page shows it.
  await page.evaluate((id) => {
    const b = document.createElement('button');
    b.dataset.act = 'cancel'; b.dataset.id = id; b.id = 'stale-cancel'; b.textContent = 'cancel';
    document.querySelector('#queue tbody tr').lastElementChild.append(b);
  }, env.B_TASK);
  await page.click('#stale-cancel');
  await waitFor(page, () => { const m = document.getElementById('message'); return !m.hidden && /refused/.test(m.textContent); },
    [], 'the refusal message');
  const refusal = await page.$eval('#message', (el) => el.textContent);
  if (!refusal.includes(env.USER_B) && !/not permitted/i.test(refusal)) fail(`the refusal does not say why: '${refusal}'`);
  if (stateOf(env.B_TASK) !== 'running') fail(`B's task is ${stateOf(env.B_TASK)} after A's refused cancel`);
  await shot(page, 'queue-refused');

  check('the task page of a running task: attempts, the live log, its GPU charts drawn from live samples');
  const running = asA('submit', '--gpus', '1', '--gpu-mem', '4G', '--name', 'gpu-task', '--', 'sh', '-c',
    'echo "hello from the dashboard test"; while [ ! -f go2 ]; do sleep 0.1; done; echo "the end of the log"');
  await page.goto(`${url}/#/task/${running}`, { waitUntil: 'load' });
  await waitFor(page, () => document.querySelector('table.attempts tbody tr'), [], 'the attempts table');
  await waitFor(page, () => (document.getElementById('log-stdout')?.textContent || '').includes('hello from the dashboard test'),
    [], 'the task\'s stdout');
  await waitFor(page, () => {
    const charts = document.querySelectorAll('#task-gpu .chart');
    return charts.length === 2 && [...charts].every((c) => Number(c.dataset.points) >= 2);
  }, [], 'the task\'s two GPU charts with at least two samples', 30000);
  await new Promise((r) => setTimeout(r, 300));   // the charts' next animation frame
  const taskPainted = await paintedPixels(page, '#task-gpu');
  if (taskPainted.length < 2 || taskPainted.some((n) => n <= 1000)) fail(`task GPU chart canvases painted: ${taskPainted}`);
  await shot(page, 'task');
  writeFileSync(join(env.WORK_A, 'go2'), '');
  await waitFor(page, () => (document.getElementById('log-stdout')?.textContent || '').includes('the end of the log'),
    [], 'the followed log to reach the task\'s last line');
  await waitFor(page, () => document.querySelector('.toolbar .state-succeeded'), [], 'the task page to show it succeeded');

  check('the GPU page\'s four charts are painted with data');
  await page.goto(`${url}/#/gpus`, { waitUntil: 'load' });
  await waitFor(page, () => {
    const charts = document.querySelectorAll('#gpu-charts .chart');
    return charts.length === 4 && [...charts].every((c) => Number(c.dataset.points) >= 2);
  }, [], 'four GPU charts with at least two samples each', 40000);
  await waitFor(page, () => document.querySelector('#gpu-now tbody tr'), [], 'the GPUs table');
  await new Promise((r) => setTimeout(r, 300));   // the chart's next animation frame
  const painted = await paintedPixels(page, '#gpu-charts');
  if (painted.length < 4 || painted.some((n) => n <= 1000)) fail(`GPU chart canvases painted: ${painted}`);
  const holders = await page.$$eval('#gpu-holders .holder-bar', (bars) => bars.map((b) => b.textContent));
  if (!holders.includes(String(env.B_TASK))) fail(`who held the GPUs does not show B's task ${env.B_TASK}: ${holders}`);
  await shot(page, 'gpus');

  check('the experiment page: leaderboard and learning curves');
  await page.goto(`${url}/#/experiments`, { waitUntil: 'load' });
  // A system daemon names an experiment OWNER/NAME.
  const expName = `${env.USER_A}/${env.EXPERIMENT}`;
  await waitFor(page, (name) => document.querySelector(`#experiments tr[data-name="${name}"]`), [expName], 'the experiment in the list');
  await page.click(`#experiments tr[data-name="${expName}"] a`);
  await waitFor(page, () => document.querySelectorAll('#leaderboard tbody tr').length === 3, [], 'three trials in the leaderboard');
  await waitFor(page, () => Number(document.querySelector('#exp-curves .chart')?.dataset.points) >= 3, [], 'learning curves with data');
  const first = await page.$eval('#leaderboard tbody tr', (tr) => tr.dataset.trial);
  if (first !== '2') fail(`the leaderboard's first trial is ${first}, expected 2 (lr 0.3 learns fastest)`);
  const curves = await paintedPixels(page, '#exp-curves');
  if (!curves.some((n) => n > 1000)) fail(`learning curve canvases painted: ${curves}`);
  // ASHA's stops: the trials the daemon stopped early, and only those, are marked so.
  const shown = await page.evaluate(async (name) => {
    const e = await (await fetch(`/api/v1/experiments/${name}`, { headers: { Authorization: `Bearer ${sessionStorage.getItem('drover-token')}` } })).json();
    const rows = [...document.querySelectorAll('#leaderboard tbody tr')];
    return {
      stopped: e.trials.filter((t) => t.stopped_early).map((t) => String(t.trial)).sort(),
      marked: rows.filter((r) => r.classList.contains('stopped') && /stopped by ASHA/.test(r.textContent)).map((r) => r.dataset.trial).sort(),
    };
  }, expName);
  if (JSON.stringify(shown.stopped) !== JSON.stringify(shown.marked)) fail(`ASHA stopped trials ${shown.stopped}, the page marks ${shown.marked}`);
  console.log(`    ASHA stopped trials: [${shown.stopped}]`);
  const verdict = await page.$eval('#exp-stats', (el) => el.textContent);
  if (!/passed/.test(verdict)) fail(`the experiment's verdict is not shown as passed: ${verdict}`);
  await shot(page, 'experiment');
  // The README's picture (docs/dashboard.png): this page, made here so that it stays true.
  if (env.DROVER_UPDATE_SCREENSHOT === '1') {
    const file = join(env.DOCS, 'dashboard.png');
    await page.screenshot({ path: file });
    const size = statSync(file).size;
    if (size >= 300 * 1024) fail(`${file} is ${size} bytes, over 300 KB`);
    console.log(`wrote ${file} (${size} bytes)`);
  }

  check('the users page (system mode)');
  await page.goto(`${url}/#/users`, { waitUntil: 'load' });
  await waitFor(page, () => document.querySelectorAll('#users tbody tr').length >= 2, [], 'two users in the users page');
  await shot(page, 'users');

  check('a phone-width screen: no sideways scrolling of the page');
  await page.setViewport({ width: 390, height: 844, deviceScaleFactor: 2 });
  await page.goto(`${url}/#/queue`, { waitUntil: 'load' });
  await page.waitForSelector('#queue tbody tr[data-id]', { timeout: 15000 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
  if (overflow > 391) fail(`at 390 px the page is ${overflow} px wide`);
  await shot(page, 'queue-phone');
  await page.goto(`${url}/#/gpus`, { waitUntil: 'load' });
  await waitFor(page, () => {
    const charts = document.querySelectorAll('#gpu-charts .chart');
    return charts.length === 4 && [...charts].every((c) => Number(c.dataset.points) >= 2 &&
      c.querySelector('.uplot').getBoundingClientRect().right <= c.getBoundingClientRect().right + 1);
  }, [], 'GPU charts with data, inside their boxes, at phone width');
  await new Promise((r) => setTimeout(r, 300));   // the charts' next animation frame
  await shot(page, 'gpus-phone');

  check('dark mode follows prefers-color-scheme');
  await page.setViewport({ width: 1280, height: 860 });
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
  await page.goto(`${url}/#/experiment/${env.USER_A}/${env.EXPERIMENT}`, { waitUntil: 'load' });
  await waitFor(page, () => document.querySelectorAll('#leaderboard tbody tr').length === 3, [], 'the leaderboard in dark mode');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g).map(Number);
  if (r + g + b > 200) fail(`dark mode background is ${bg}`);
  await shot(page, 'experiment-dark');

  check('the one-time link of `drover dashboard` logs in with a session cookie; writes carry the CSRF token');
  const context = await browser.createBrowserContext();   // no sessionStorage token, no cookie
  const cookiePage = await context.newPage();
  cookiePage.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(`console (cookie login): ${msg.text()}`);
  });
  cookiePage.on('pageerror', (err) => consoleErrors.push(`pageerror (cookie login): ${err.message}`));
  const link = asA('dashboard');
  if (!link.startsWith(url)) fail(`drover dashboard printed '${link}', not a link to ${url}`);
  const doomed = asA('submit', '--name', 'cancel-by-cookie', '--', 'sleep', '300');
  await cookiePage.goto(link, { waitUntil: 'load' });
  await waitFor(cookiePage, (id) => document.querySelector(`#queue tr[data-id="${id}"] button[data-act="cancel"]`), [doomed],
    `task ${doomed} with a cancel button after the cookie login`);
  const cookieWho = await cookiePage.$eval('#who', (el) => el.textContent);
  if (!cookieWho.includes(env.USER_A)) fail(`after the link the header shows '${cookieWho}'`);
  if (await cookiePage.evaluate(() => sessionStorage.getItem('drover-token')) !== null) fail('the cookie login kept a token in sessionStorage');
  await cookiePage.click(`#queue tr[data-id="${doomed}"] button[data-act="cancel"]`);
  await waitFor(cookiePage, (id) => document.querySelector(`#queue tr[data-id="${id}"][data-state="cancelled"]`), [doomed],
    `task ${doomed} cancelled through the session`);
  check('log out ends the session: the login form again, and a reload stays logged out');
  await cookiePage.click('#logout');
  await cookiePage.waitForSelector('#login #token', { timeout: 10000 });
  if (!(await cookiePage.$eval('#nav', (el) => el.hidden))) fail('the navigation shows while logged out');
  await cookiePage.reload({ waitUntil: 'load' });
  await cookiePage.waitForSelector('#login #token', { timeout: 10000 });
  await context.close();

  check('no console errors');
  // The browser logs every 4xx answer as a console error: the login probe's 401 and the refused
  // cancel's 403 are expected; nothing else may be there.
  const unexpected = consoleErrors.filter((e) => !/Failed to load resource: the server responded with a status of (401|403)/.test(e));
  if (unexpected.length) fail(`console errors:\n${unexpected.join('\n')}\n(responses ≥ 400: ${expectedErrors.join(', ')})`);
  console.log(`ok: ${checks} browser checks; screenshots in ${shots}`);
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  if (consoleErrors.length) console.error(`console errors:\n${consoleErrors.join('\n')}`);
  status = 1;
} finally {
  clearInterval(nvmlTimer);
  await browser.close();
}
process.exit(status);

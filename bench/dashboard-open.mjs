// bench/dashboard-open.mjs URL SECONDS: keeps the dashboard open in headless Chromium for a
// while (bench/api.sh measures the daemon meanwhile). URL: a `drover dashboard` login link.
import puppeteer from 'puppeteer-core';

const [url, seconds] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage();
await page.goto(url, { waitUntil: 'networkidle2' }).catch(() => {});
await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
await browser.close();

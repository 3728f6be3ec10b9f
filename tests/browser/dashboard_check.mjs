// Loads the dashboard in headless Chromium, signs in with a token, waits for the jobs table and
// the GPU packing view, saves a screenshot, then looks again at a phone's width (420 px) and
// reports anything that sticks out sideways; prints one JSON object with what it saw.
// Usage: node dashboard_check.mjs URL TOKEN SCREENSHOT_PATH [CHROMIUM_PATH]
import { chromium } from "playwright-core";

const [url, token, screenshot, executable = "/usr/bin/chromium"] = process.argv.slice(2);
const userDataDir = process.env.JIGSAW_BROWSER_PROFILE;
const args = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: executable,
  headless: true,
  args,
  viewport: { width: 1440, height: 1500 },
  deviceScaleFactor: 1,
});
const result = { consoleErrors: [], pageErrors: [] };
try {
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (msg) => { if (msg.type() === "error") result.consoleErrors.push(msg.text()); });
  page.on("pageerror", (err) => result.pageErrors.push(String(err)));

  await page.goto(url, { waitUntil: "load" });
  result.loginShown = await page.isVisible("#login-form");
  await page.fill("#token", "not-a-real-token");
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#login-error:not(:empty)", { timeout: 10000 });
  result.badTokenMessage = await page.textContent("#login-error");

  await page.fill("#token", token);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("body[data-loaded=true]", { timeout: 20000 });
  // Let one more refresh land so the charts have a few points.
  await page.waitForTimeout(2500);
  result.tokenInUrl = page.url().includes(token);
  result.jobRows = await page.$$eval("#jobs tbody tr", (rows) => rows.map((r) => ({
    id: r.dataset.jobId,
    name: r.querySelector(".job-name span:last-child").textContent,
    state: r.querySelector(".badge").textContent,
    plan: r.querySelector(".plan .d") ? r.querySelector(".plan .d").textContent : null,
    planNote: r.querySelector(".plan .muted") ? r.querySelector(".plan .muted").textContent : null,
    eta: r.querySelector(".eta") ? r.querySelector(".eta").textContent : null,
    etaTitle: r.querySelector(".eta") ? r.querySelector(".eta").title : null,
    reason: r.querySelector(".reason") ? r.querySelector(".reason").textContent : null,
  })));
  result.gpus = await page.$$eval(".gpu", (gpus) => gpus.map((g) => ({
    id: g.dataset.gpu,
    shared: g.classList.contains("shared"),
    jobs: [...new Set([...g.querySelectorAll(".block")].map((b) => b.dataset.job))],
    roles: [...g.querySelectorAll(".block")].map((b) => b.dataset.role),
    load: g.querySelector(".gpu-label .num").textContent,
  })));
  result.charts = await page.$$eval(".chart canvas", (c) => c.length);
  result.summary = await page.$$eval("#summary .card .label", (c) => c.map((x) => x.textContent));
  await page.screenshot({ path: screenshot, fullPage: true });

  // A phone's width: the page must not scroll sideways, and no visible element may reach
  // past the right edge (the jobs table and the packing card did).
  await page.setViewportSize({ width: 420, height: 900 });
  await page.waitForTimeout(2500);  // a refresh redraws at the new width
  result.narrow = await page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const sticking = [...document.querySelectorAll("body *")]
      .filter((node) => node.getClientRects().length > 0)
      .filter((node) => node.getBoundingClientRect().right > width + 1)
      .map((node) => node.tagName.toLowerCase() + (node.className ? "." + String(node.className).split(" ")[0] : "") +
        " right=" + Math.round(node.getBoundingClientRect().right));
    return { width, scrollWidth: document.documentElement.scrollWidth, sticking: sticking.slice(0, 20) };
  });
  await page.screenshot({ path: screenshot.replace(/\.png$/, "-narrow.png"), fullPage: true });
} finally {
  await context.close();
}
console.log(JSON.stringify(result));

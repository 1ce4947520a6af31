// The demo page in headless Chromium against a running gateway: the page loads a channel's doc, a
// row changes in PostgreSQL, and the page shows the new doc; prints the time from the commit to the
// DOM. Run by tests/scenarios/gateway_browser.sh; skipped without its settings:
//   GATEWAY_URL     the gateway, e.g. http://127.0.0.1:8080
//   TOKEN           a token for CHANNEL (may be empty for a --public channel)
//   CHANNEL         the channel to watch; ALSO_CHANNELS (optional, comma-separated) are watched too
//   TRANSPORT       ws (default) or sse
//   UPDATE_CMD      a shell command that changes the row; it prints nothing, or the time of the
//                   commit in ms since the epoch (e.g. from clock_timestamp() in a statement run
//                   after the commit; the same machine's clock), else its exit counts as the commit
//   EXPECT          text pre.doc must then contain (the doc is pretty-printed: "status": "paid")
//   SCREENSHOT_DIR  where demo.png goes (default: the current directory)
//   CHROMIUM        the browser (default /usr/bin/chromium)
// A plain `node tests/browser/demo.test.js` exits non-zero when the test fails.
'use strict';
const { test } = require('node:test');
const { launchChromium } = require('./chromium.js');
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');

const env = process.env;
const transport = env.TRANSPORT || 'ws';
const missing = ['GATEWAY_URL', 'CHANNEL', 'UPDATE_CMD', 'EXPECT'].filter((n) => !env[n]);
const skip = missing.length ? `needs ${missing.join(', ')} (tests/scenarios/gateway_browser.sh sets them)` : false;
const now = () => performance.timeOrigin + performance.now();

function run(cmd) {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`UPDATE_CMD exited ${code}: ${out.trim()}`))));
  });
}

test(`demo page over ${transport}: a committed change reaches the DOM`, { skip, timeout: 90000 }, async () => {
  const channel = env.CHANNEL;
  const expect = env.EXPECT;
  const shots = env.SCREENSHOT_DIR || '.';
  fs.mkdirSync(shots, { recursive: true });
  const q = new URLSearchParams();
  if (env.TOKEN) q.set('token', env.TOKEN);
  q.append('channel', channel);
  for (const c of (env.ALSO_CHANNELS || '').split(',').filter(Boolean)) q.append('channel', c);
  q.set('transport', transport);
  const url = `${env.GATEWAY_URL.replace(/\/+$/, '')}/?${q}`;

  const browser = await launchChromium(env);
  const console_ = [];
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 480 });
    page.on('console', (m) => console_.push(`console.${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => console_.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => console_.push(`request failed: ${r.url().replace(/token=[^&]*/, 'token=…')} ${r.failure() && r.failure().errorText}`));
    page.on('response', (r) => { if (r.status() >= 400) console_.push(`HTTP ${r.status()}: ${r.url().replace(/token=[^&]*/, 'token=…')}`); });

    // What the page shows for the channel: {version, doc, error, status}, or null without a card.
    const shown = () => page.evaluate((ch) => {
      const el = [...document.querySelectorAll('[data-channel]')].find((e) => e.dataset.channel === ch);
      const status = document.getElementById('status').textContent;
      if (!el) return { version: '', doc: '(no card)', error: '', status };
      return {
        version: el.querySelector('.version').textContent,
        doc: el.querySelector('pre.doc').textContent,
        error: el.querySelector('.error') ? el.querySelector('.error').textContent : '',
        status,
      };
    }, channel);
    const explain = async () => {
      const s = await shown().catch((e) => ({ doc: `(page gone: ${e.message})` }));
      return `\n  status line: ${s.status}\n  card error: ${s.error || '-'}\n  version: ${s.version || '-'}\n  pre.doc: ${s.doc}` +
        (console_.length ? `\n  ${console_.join('\n  ')}` : '');
    };

    const opened = now();
    await page.goto(url, { waitUntil: 'load' });
    try {
      await page.waitForFunction((ch) => {
        const el = [...document.querySelectorAll('[data-channel]')].find((e) => e.dataset.channel === ch);
        return el && el.querySelector('.version').textContent !== '';
      }, { timeout: 10000 }, channel);
    } catch (e) {
      await page.screenshot({ path: path.join(shots, 'demo.png') }).catch(() => {});
      assert.fail(`the page showed no doc of ${channel} within 10 s over ${transport}:${await explain()}`);
    }
    const first = await shown();
    console.log(`${transport}: first doc ${first.version} after ${Math.round(now() - opened)} ms (page load included)`);
    assert.ok(!first.doc.includes(expect),
      `pre.doc already shows ${JSON.stringify(expect)} before UPDATE_CMD ran: the test would measure nothing:${await explain()}`);

    // The page records when the text appears, and every version it shows (they must only go up).
    await page.evaluate((ch, text) => {
      const el = [...document.querySelectorAll('[data-channel]')].find((e) => e.dataset.channel === ch);
      window.__versions = [el.querySelector('.version').textContent];
      window.__seenAt = 0;
      new MutationObserver(() => {
        const v = el.querySelector('.version').textContent;
        if (v !== window.__versions[window.__versions.length - 1]) window.__versions.push(v);
        if (!window.__seenAt && el.querySelector('pre.doc').textContent.includes(text)) {
          window.__seenAt = performance.timeOrigin + performance.now();
        }
      }).observe(el, { subtree: true, childList: true, characterData: true });
    }, channel, expect);

    const started = now();
    const printed = (await run(env.UPDATE_CMD)).trim();
    const exited = now();
    const committed = /^\d+(\.\d+)?$/.test(printed) ? Number(printed) : exited;
    const from = committed === exited ? 'the exit of UPDATE_CMD' : 'the commit time UPDATE_CMD printed';
    try {
      await page.waitForFunction(() => window.__seenAt > 0, { timeout: 10000 });
    } catch (e) {
      await page.screenshot({ path: path.join(shots, 'demo.png') }).catch(() => {});
      assert.fail(`the page did not show ${JSON.stringify(expect)} within 10 s of UPDATE_CMD over ${transport}:${await explain()}`);
    }
    const seenAt = await page.evaluate(() => window.__seenAt);
    const versions = await page.evaluate(() => window.__versions);
    await new Promise((r) => setTimeout(r, 300));  // let the flash fade a little for the picture
    await page.screenshot({ path: path.join(shots, 'demo.png') });
    console.log(`${transport}: commit→DOM: ${Math.round(seenAt - committed)} ms ` +
      `(from ${from}; UPDATE_CMD ran ${Math.round(exited - started)} ms; versions shown ${versions.join(' → ')})`);
    const { compareVersions } = require('../../worker/gateway/assets/docsync-client.js');
    for (let i = 1; i < versions.length; i++) {
      assert.ok(compareVersions(versions[i], versions[i - 1]) > 0, `the page showed version ${versions[i]} after ${versions[i - 1]}`);
    }
    const errors = console_.filter((l) => l.startsWith('page error'));
    assert.deepStrictEqual(errors, [], 'the page threw');
  } finally {
    await browser.close();
  }
});

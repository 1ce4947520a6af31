// Token refresh in headless Chromium against a running gateway: the client library, on the
// gateway's own page, follows a channel with getToken handing out tokens that expire every few
// seconds; while the row keeps changing, every change must reach the page, with no token error and
// no lost connection (WS: `auth` messages on the same socket; SSE: the stream reopened with each new
// token, resuming from its cursor). Run by tests/scenarios/gateway_browser.sh; skipped without:
//   GATEWAY_URL      the gateway, e.g. http://127.0.0.1:8080
//   JWT_SECRET_FILE  the gateway's --jwt-secret-file (the tokens are minted here with it)
//   CHANNEL          the channel to follow (the tokens name exactly it)
//   TICK_CMD         a shell command that changes the row and prints the new value of FIELD in the doc
//   FIELD            the doc's field TICK_CMD prints (default n)
//   TRANSPORT        ws (default) or sse
//   TOKEN_TTL        seconds each token lives (default 4); TICKS (default 6) changes, TICK_MS (default
//                    1500) apart
//   CHROMIUM         the browser (default /usr/bin/chromium)
'use strict';
const { test } = require('node:test');
const { launchChromium } = require('./chromium.js');
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const { compareVersions } = require('../../worker/gateway/assets/docsync-client.js');

const env = process.env;
const transport = env.TRANSPORT || 'ws';
const missing = ['GATEWAY_URL', 'JWT_SECRET_FILE', 'CHANNEL', 'TICK_CMD'].filter((n) => !env[n]);
const skip = missing.length ? `needs ${missing.join(', ')} (tests/scenarios/gateway_browser.sh sets them)` : false;
const ttl = Number(env.TOKEN_TTL || 4);
const ticks = Number(env.TICKS || 6);
const tickMs = Number(env.TICK_MS || 1500);
const field = env.FIELD || 'n';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function run(cmd) {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`TICK_CMD exited ${code}: ${err.trim()}`))));
  });
}

// An HS256 JWT, as the gateway verifies it: the secret is the file's bytes less one trailing newline.
function mint(secret, claims) {
  const b64u = (b) => Buffer.from(b).toString('base64url');
  const head = b64u(JSON.stringify({ alg: 'HS256', typ: 'JWT' })) + '.' + b64u(JSON.stringify(claims));
  return head + '.' + b64u(crypto.createHmac('sha256', secret).update(head).digest());
}

test(`token refresh over ${transport}: tokens of ${ttl} s, no doc lost`, { skip, timeout: 120000 }, async () => {
  let secret = fs.readFileSync(env.JWT_SECRET_FILE);
  if (secret[secret.length - 1] === 0x0a) secret = secret.subarray(0, secret.length - 1);
  const channel = env.CHANNEL;
  let minted = 0;

  const browser = await launchChromium(env);
  const console_ = [];
  try {
    const page = await browser.newPage();
    page.on('pageerror', (e) => console_.push(`page error: ${e.message}`));
    page.on('console', (m) => console_.push(`console.${m.type()}: ${m.text()}`));
    await page.exposeFunction('__mintToken', () => {
      minted++;
      return mint(secret, { exp: Math.floor(Date.now() / 1000) + ttl, channels: [channel] });
    });
    await page.goto(`${env.GATEWAY_URL.replace(/\/+$/, '')}/`, { waitUntil: 'load' });
    await page.evaluate((ch, transport) => {
      const log = (window.__log = { docs: [], statuses: [], errors: [] });
      const client = new window.DocsyncClient({ transport, getToken: () => window.__mintToken() });
      client.on('status', (s) => log.statuses.push(s));
      client.on('error', (e) => log.errors.push(e));
      client.subscribe(ch, (doc, meta) => log.docs.push({ doc, version: meta.version }));
      window.__client = client;
    }, channel, transport);
    const log = () => page.evaluate(() => window.__log);
    const explain = async () => {
      const l = await log();
      return `\n  statuses: ${l.statuses.join(' ')}\n  errors: ${JSON.stringify(l.errors)}\n  tokens minted: ${minted}` +
        `\n  last docs: ${JSON.stringify(l.docs.slice(-3))}` + (console_.length ? `\n  ${console_.join('\n  ')}` : '');
    };

    try {
      await page.waitForFunction(() => window.__log.docs.length > 0, { timeout: 10000 });
    } catch (e) {
      assert.fail(`no doc of ${channel} within 10 s over ${transport}:${await explain()}`);
    }
    const started = Date.now();
    for (let i = 0; i < ticks; i++) {
      const want = await run(env.TICK_CMD);
      try {
        await page.waitForFunction((f, want) => {
          const d = window.__log.docs[window.__log.docs.length - 1];
          return d && d.doc && String(d.doc[f]) === want;
        }, { timeout: 10000 }, field, want);
      } catch (e) {
        assert.fail(`change ${i + 1} (${field} = ${want}) did not reach the page within 10 s over ${transport}:${await explain()}`);
      }
      await sleep(tickMs);
    }
    const l = await log();
    const seconds = (Date.now() - started) / 1000;
    console.log(`${transport}: ${ticks} changes over ${seconds.toFixed(1)} s with ${minted} tokens of ${ttl} s; ` +
      `statuses ${l.statuses.join(' ')}; ${l.docs.length} docs delivered`);
    assert.deepStrictEqual(l.errors, [], `errors while the tokens were refreshed:${await explain()}`);
    assert.ok(minted >= Math.floor(seconds / ttl) + 1, `only ${minted} tokens in ${seconds} s:${await explain()}`);
    assert.ok(!l.statuses.includes('reconnecting'), `the connection was lost:${await explain()}`);
    if (transport === 'ws') {
      assert.deepStrictEqual(l.statuses, ['connecting', 'open'], `the WebSocket was reopened:${await explain()}`);
    }
    for (let i = 1; i < l.docs.length; i++) {
      assert.ok(compareVersions(l.docs[i].version, l.docs[i - 1].version) > 0,
        `version ${l.docs[i].version} delivered after ${l.docs[i - 1].version}`);
    }
    await page.evaluate(() => window.__client.close());
  } finally {
    await browser.close();
  }
});

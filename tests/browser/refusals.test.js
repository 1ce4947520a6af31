// Refusals as the client library reports them, in headless Chromium against a running gateway (on
// the gateway's own page): a channel the token does not name is reported as forbidden and dropped
// while the others go on; a fixed token past its exp, and no token for a channel that is not public,
// are reported and stop the client ('closed') instead of reconnecting forever. Run by
// tests/scenarios/gateway_browser.sh; skipped without:
//   GATEWAY_URL      the gateway, e.g. http://127.0.0.1:8080
//   JWT_SECRET_FILE  the gateway's --jwt-secret-file (tokens are minted here with it)
//   CHANNEL          a channel with a doc, not public
//   OTHER_CHANNEL    a channel the tokens minted here do not name, not public (default db:secret:1)
//   TRANSPORT        ws (default) or sse
//   CHROMIUM         the browser (default /usr/bin/chromium)
'use strict';
const { test } = require('node:test');
const { launchChromium } = require('./chromium.js');
const assert = require('node:assert');
const crypto = require('node:crypto');
const fs = require('node:fs');

const env = process.env;
const transport = env.TRANSPORT || 'ws';
const missing = ['GATEWAY_URL', 'JWT_SECRET_FILE', 'CHANNEL'].filter((n) => !env[n]);
const skip = missing.length ? `needs ${missing.join(', ')} (tests/scenarios/gateway_browser.sh sets them)` : false;

function mint(secret, claims) {
  const b64u = (b) => Buffer.from(b).toString('base64url');
  const head = b64u(JSON.stringify({ alg: 'HS256', typ: 'JWT' })) + '.' + b64u(JSON.stringify(claims));
  return head + '.' + b64u(crypto.createHmac('sha256', secret).update(head).digest());
}

test(`refusals over ${transport}`, { skip, timeout: 90000 }, async (t) => {
  let secret = fs.readFileSync(env.JWT_SECRET_FILE);
  if (secret[secret.length - 1] === 0x0a) secret = secret.subarray(0, secret.length - 1);
  const channel = env.CHANNEL;
  const other = env.OTHER_CHANNEL || 'db:secret:1';
  const exp = (s) => Math.floor(Date.now() / 1000) + s;

  const browser = await launchChromium(env);
  try {
    const page = await browser.newPage();
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    // The WebSocket messages the gateway sent, to show when an error did not reach the library.
    await page.evaluateOnNewDocument(() => {
      const Native = window.WebSocket;
      window.__frames = [];
      window.WebSocket = class extends Native {
        constructor(...args) {
          super(...args);
          this.addEventListener('message', (e) => window.__frames.push(String(e.data)));
        }
      };
    });
    await page.goto(`${env.GATEWAY_URL.replace(/\/+$/, '')}/`, { waitUntil: 'load' });

    // Follows `channels` with `token` until `done(log)` holds (or 8 s pass); the client's record.
    const follow = (token, channels, done) => page.evaluate(async (transport, token, channels, done) => {
      window.__frames = [];
      const log = { statuses: [], errors: [], docs: [] };
      const client = new window.DocsyncClient({ transport, token: token || undefined, reconnectDelay: 100 });
      client.on('status', (s) => log.statuses.push(s));
      client.on('error', (e) => log.errors.push(e));
      for (const c of channels) client.subscribe(c, (doc, meta) => log.docs.push(meta.channel));
      const until = new Function('log', 'status', `return (${done})`);
      const end = Date.now() + 8000;
      while (Date.now() < end && !until(log, client.status)) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));  // nothing more is to come: no retry loop
      log.final = client.status;
      log.frames = window.__frames.slice(0, 6);
      client.close();
      return log;
    }, transport, token, channels, done);
    const show = (log) => `\n  statuses: ${log.statuses.join(' ')}\n  errors: ${JSON.stringify(log.errors)}\n  docs: ${log.docs.join(' ')}` +
      (log.frames.length ? `\n  WebSocket messages received (an error is {"type":"error",...}):\n    ${log.frames.join('\n    ')}` : '');

    await t.test('a channel the token does not name: forbidden, the others go on', async () => {
      const token = mint(secret, { exp: exp(600), channels: [channel] });
      const log = await follow(token, [channel, other],
        "log.docs.length > 0 && log.errors.length > 0 && status === 'open'");
      assert.ok(log.errors.some((e) => e.error === 'forbidden' && e.channel === other),
        `no forbidden error for ${other}:${show(log)}`);
      assert.ok(log.docs.includes(channel), `no doc of ${channel}:${show(log)}`);
      assert.ok(!log.docs.includes(other), `a doc of ${other}:${show(log)}`);
      assert.strictEqual(log.final, 'open', `the client did not carry on:${show(log)}`);
      assert.strictEqual(log.errors.length, 1, `the refused channel was retried:${show(log)}`);
    });

    await t.test('a fixed token past its exp: token_expired, the client stops', async () => {
      const token = mint(secret, { exp: exp(-60), channels: [channel] });
      const log = await follow(token, [channel], "status === 'closed' && log.errors.length > 0");
      assert.deepStrictEqual(log.errors.map((e) => e.error), ['token_expired'], show(log));
      assert.strictEqual(log.final, 'closed', show(log));
      assert.deepStrictEqual(log.docs, [], show(log));
    });

    await t.test('a token signed with another key: invalid_token, the client stops', async () => {
      const token = mint(Buffer.from('another key, at least thirty-two bytes long'), { exp: exp(600), channels: [channel] });
      const log = await follow(token, [channel], "status === 'closed' && log.errors.length > 0");
      assert.deepStrictEqual(log.errors.map((e) => e.error), ['invalid_token'], show(log));
      assert.strictEqual(log.final, 'closed', show(log));
    });

    await t.test('no token for a channel that is not public: missing_token for it', async () => {
      const log = await follow(null, [channel], 'log.errors.length > 0');
      // (the 401 of an SSE request need not name the channel)
      assert.deepStrictEqual(log.errors.map((e) => [e.error, e.channel || channel]), [['missing_token', channel]], show(log));
      assert.deepStrictEqual(log.docs, [], show(log));
    });
    assert.deepStrictEqual(pageErrors, [], 'the page threw');
  } finally {
    await browser.close();
  }
});

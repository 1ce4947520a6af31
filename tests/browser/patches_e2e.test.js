// Patches end to end in headless Chromium: a real docsync-gateway (started and restarted here) and
// a real Redis, into which docs are published as the worker publishes them (docs/patches.md): the key
// SET to the whole doc's envelope, then the patch envelope (or the whole one) PUBLISHed on the
// channel. docsync-client.js on the gateway's page follows the channel and a second one on the same
// connection (over SSE, a stream whose cursor holds two versions); after each version its handler
// must hold exactly that version's doc, and the page must have received `patch` messages (counted
// on the wire), so the test fails when patches are never used. Phases:
//   patches      each edit (replace, add at the array end, remove, move, test, merge patches, an
//                escaped key) reaches the page as a patch
//   restart      the gateway is stopped, two versions are published meanwhile, it starts again: the
//                client resumes and ends on the right doc, and the next edits come as patches again
//   drop         the page loses one patch message: the next patch does not fit the doc it holds, and
//                the client reads GET /v1/docs/{channel} and goes on from it
//   missed       a version is set in Redis but never published: the gateway does not hold the next
//                patch's base, and the page still ends on the right doc
// Run by tests/scenarios/gateway_patches.sh; skipped without:
//   GATEWAY_BIN      the built docsync-gateway
//   REDIS_PORT       a running redis-server on 127.0.0.1
//   JWT_SECRET_FILE  for the gateway's --jwt-secret-file (the token is minted here with it)
//   TRANSPORT        ws (default) or sse
//   GATEWAY_LOG      where the gateway's output goes (default: discarded)
//   CHROMIUM         the browser (default /usr/bin/chromium)
'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const { spawn, execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { launchChromium } = require('./chromium.js');
const { compareVersions } = require('../../worker/gateway/assets/docsync-client.js');

const env = process.env;
const transport = env.TRANSPORT || 'ws';
const missing = ['GATEWAY_BIN', 'REDIS_PORT', 'JWT_SECRET_FILE'].filter((n) => !env[n]);
const skip = missing.length ? `needs ${missing.join(', ')} (tests/scenarios/gateway_patches.sh sets them)` : false;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const channel = `db:board:${transport}`;
const other = `db:board:${transport}2`;  // a second channel on the same connection (an SSE cursor of two)

function mint(secret, claims) {
  const b64u = (b) => Buffer.from(b).toString('base64url');
  const head = b64u(JSON.stringify({ alg: 'HS256', typ: 'JWT' })) + '.' + b64u(JSON.stringify(claims));
  return head + '.' + b64u(crypto.createHmac('sha256', secret).update(head).digest());
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

const redis = (...args) => execFileSync('redis-cli', ['-p', env.REDIS_PORT, ...args.map(String)]).toString().trim();

// ---- versions and edits ------------------------------------------------------------------------

let lsnCounter = 0x1000;
const nextVersion = () => { lsnCounter += 0x28; return { generation: 1, lsn: `0/${lsnCounter.toString(16).toUpperCase()}` }; };
const versionText = (v) => `${v.generation}/${v.lsn}`;
const clone = (d) => JSON.parse(JSON.stringify(d));

function firstDoc() {
  return {
    game: 7,
    title: 'round 1 ✓',
    'a/b': 0,
    meta: { round: 1, note: 'first' },
    scores: Array.from({ length: 40 }, (_, i) => ({ player: `p${i}`, score: i * 10, tags: ['a', 'é😀'] })),
  };
}

// Edit i: the patch (form, body) and the same change made by hand to a copy of the doc.
function edit(i) {
  const k = i % 8;
  switch (k) {
    case 0: return { form: 'patch', body: [{ op: 'replace', path: '/scores/3/score', value: 1000 + i }], make: (d) => { d.scores[3].score = 1000 + i; } };
    case 1: return { form: 'patch', body: [{ op: 'add', path: '/scores/-', value: { player: `new${i}😀`, score: -0.5, tags: [] } }],
                     make: (d) => { d.scores.push({ player: `new${i}😀`, score: -0.5, tags: [] }); } };
    case 2: return { form: 'patch', body: [{ op: 'remove', path: '/scores/0' }], make: (d) => { d.scores.shift(); } };
    case 3: return { form: 'merge', body: { title: `round ${i} ✓`, meta: { round: i } }, make: (d) => { d.title = `round ${i} ✓`; d.meta.round = i; } };
    case 4: return { form: 'patch', body: [{ op: 'move', from: '/scores/0', path: '/scores/2' }],
                     make: (d) => { const [x] = d.scores.splice(0, 1); d.scores.splice(2, 0, x); } };
    case 5: return { form: 'patch', body: [{ op: 'test', path: '/game', value: 7 }, { op: 'add', path: '/scores/1', value: { player: `ins${i}`, score: 1e21, tags: ['~/'] } }],
                     make: (d) => { d.scores.splice(1, 0, { player: `ins${i}`, score: 1e21, tags: ['~/'] }); } };
    case 6: return { form: 'patch', body: [{ op: 'replace', path: '/a~1b', value: i }, { op: 'copy', from: '/scores/2', path: '/scores/-' }],
                     make: (d) => { d['a/b'] = i; d.scores.push(clone(d.scores[2])); } };
    default:  // a merge patch replaces an array whole, and null removes a member that is not there
      return { form: 'merge', body: { meta: { note: `n${i}`, extra: null, tags: [i, `t${i}`] } },
               make: (d) => { d.meta.note = `n${i}`; d.meta.tags = [i, `t${i}`]; } };
  }
}

// The worker's side: the key holds the whole doc, the channel gets the patch (or nothing: `quiet`).
class Publisher {
  constructor(channel) {
    this.channel = channel;
    this.doc = firstDoc();
    this.version = nextVersion();
    this.expected = new Map();  // version text -> doc
    this.edits = 0;
  }
  envelope(extra) { return JSON.stringify({ channel: this.channel, ...extra, generation: this.version.generation, lsn: this.version.lsn }); }
  whole({ quiet = false } = {}) {
    const text = this.envelope({ doc: this.doc });
    redis('SET', this.channel, text);
    this.expected.set(versionText(this.version), clone(this.doc));
    if (!quiet) redis('PUBLISH', this.channel, text);
  }
  // One edit: with quiet, only the key changes (as if the message were lost before any gateway).
  step({ quiet = false } = {}) {
    const e = edit(this.edits++);
    const base = this.version;
    this.doc = clone(this.doc);
    e.make(this.doc);
    this.version = nextVersion();
    redis('SET', this.channel, this.envelope({ doc: this.doc }));
    this.expected.set(versionText(this.version), clone(this.doc));
    if (quiet) return;
    const patch = JSON.stringify({ channel: this.channel, [e.form]: e.body, base_generation: base.generation, base_lsn: base.lsn,
                                   generation: this.version.generation, lsn: this.version.lsn });
    redis('PUBLISH', this.channel, patch);
  }
  get current() { return versionText(this.version); }
}

// ---- the gateway ---------------------------------------------------------------------------------

class Gateway {
  constructor(port) { this.port = port; this.url = `http://127.0.0.1:${port}`; this.child = null; }
  async start() {
    const out = env.GATEWAY_LOG ? fs.openSync(env.GATEWAY_LOG, 'a') : 'ignore';
    this.child = spawn(env.GATEWAY_BIN, ['--redis', `redis://127.0.0.1:${env.REDIS_PORT}`, '--listen', `127.0.0.1:${this.port}`,
                                         '--jwt-secret-file', env.JWT_SECRET_FILE], { stdio: ['ignore', out, out] });
    const child = this.child;
    for (let i = 0; i < 100; i++) {
      if (child.exitCode !== null) throw new Error(`the gateway exited at start (${child.exitCode}); see ${env.GATEWAY_LOG}`);
      try { if ((await fetch(`${this.url}/healthz`)).status === 200) return; } catch (e) { /* not up yet */ }
      await sleep(100);
    }
    throw new Error(`the gateway at ${this.url} did not answer /healthz`);
  }
  // Waits until the gateway is subscribed to `n` channels. It serves a newly followed channel from
  // the key at once and subscribes after: a patch published in between is not received, and the
  // client gets that version whole from the key read that follows the subscription. That read
  // finds the version already sent and drops it (older_docs_dropped), so it marks the subscription.
  async subscribed(n) {
    let health = '';
    for (let i = 0; i < 100; i++) {
      try { health = await (await fetch(`${this.url}/healthz`)).json(); } catch (e) { health = e.message; }
      if (health.older_docs_dropped >= n) return;
      await sleep(100);
    }
    throw new Error(`the gateway did not subscribe to ${n} channels within 10 s: ${JSON.stringify(health)}`);
  }
  async stop() {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(timer);
    this.child = null;
  }
}

// ---- the page ------------------------------------------------------------------------------------

// In the page: a client whose transport counts the patch messages it receives (and drops the next
// one when window.__dropNextPatch is set), and whose fetch counts the reads of whole docs (not the
// probes that follow a lost connection).
function startClient(transport, channel, other, token) {
  const log = (window.__log = { docs: [], others: [], statuses: [], errors: [], wirePatches: 0, otherPatches: 0, dropped: 0, reads: [] });
  // counts a patch message's data; whether to drop it (only the first channel's)
  const onPatch = (data) => {
    if (JSON.parse(data).channel !== channel) { log.otherPatches++; return false; }
    log.wirePatches++;
    if (!window.__dropNextPatch) return false;
    window.__dropNextPatch = false;
    log.dropped++;
    return true;
  };
  class CountingWebSocket extends WebSocket {
    constructor(url) {
      super(url);
      let handler = null;
      Object.defineProperty(this, 'onmessage', { get: () => handler, set: (fn) => { handler = fn; } });
      this.addEventListener('message', (ev) => {
        if (typeof ev.data === 'string' && ev.data.startsWith('{"type":"patch"') && onPatch(ev.data)) return;
        if (handler) handler(ev);
      });
    }
  }
  class CountingEventSource extends EventSource {
    addEventListener(type, fn, opts) {
      if (type !== 'patch') return super.addEventListener(type, fn, opts);
      return super.addEventListener(type, (ev) => { if (!onPatch(ev.data)) fn(ev); }, opts);
    }
  }
  const client = new window.DocsyncClient({
    transport, token, WebSocket: CountingWebSocket, EventSource: CountingEventSource, reconnectDelay: 100, maxReconnectDelay: 1000,
    fetch: (url, init) => { if (url.includes('/v1/docs/')) log.reads.push(url); return fetch(url, init); },
  });
  client.on('status', (s) => log.statuses.push(s));
  client.on('error', (e) => log.errors.push(e));
  client.subscribe(channel, (doc, meta) => log.docs.push({ version: meta.version, doc, patched: !!meta.patched }));
  client.subscribe(other, (doc, meta) => log.others.push({ version: meta.version, doc, patched: !!meta.patched }));
  window.__client = client;
}

test(`patches end to end over ${transport}: edits, a gateway restart, a dropped and a missed version`, { skip, timeout: 180000 }, async () => {
  let secret = fs.readFileSync(env.JWT_SECRET_FILE);
  if (secret[secret.length - 1] === 0x0a) secret = secret.subarray(0, secret.length - 1);
  const token = mint(secret, { exp: Math.floor(Date.now() / 1000) + 3600, channels: ['db:board:*'] });
  const pub = new Publisher(channel);
  const pubB = new Publisher(other);
  pub.whole();
  pubB.whole();
  const gw = new Gateway(await freePort());
  await gw.start();
  const browser = await launchChromium(env);
  const pageErrors = [];
  try {
    const page = await browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
    await page.goto(`${gw.url}/`, { waitUntil: 'load' });
    // the checkout's client, whatever the gateway was built with (gateway_browser.sh checks they match)
    await page.addScriptTag({ path: path.join(__dirname, '../../worker/gateway/assets/docsync-client.js') });
    await page.evaluate(startClient, transport, channel, other, token);
    const log = () => page.evaluate(() => window.__log);
    const explain = async () => {
      const l = await log();
      return `\n  statuses: ${l.statuses.join(' ')}\n  errors: ${JSON.stringify(l.errors)}\n  patches on the wire: ${l.wirePatches}` +
        `\n  patches of ${other}: ${l.otherPatches}, versions: ${l.others.map((d) => d.version + (d.patched ? '(p)' : '')).join(' ')}` +
        `\n  reads: ${JSON.stringify(l.reads)}\n  versions delivered: ${l.docs.map((d) => d.version + (d.patched ? '(p)' : '')).join(' ')}` +
        `\n  gateway /healthz: ${await fetch(`${gw.url}/healthz`).then((r) => r.text(), (e) => e.message)}` +
        (pageErrors.length ? `\n  ${pageErrors.join('\n  ')}` : '');
    };
    // Waits for the page to hold version `want` of the channel (`list`: docs, or others for the
    // second channel), and checks its doc.
    const reach = async (want, what, list = 'docs', p = pub) => {
      try {
        await page.waitForFunction((w, list) => { const d = window.__log[list]; return d.length && d[d.length - 1].version === w; },
                                   { timeout: 10000 }, want, list);
      } catch (e) {
        assert.fail(`${what}: the page did not reach ${want} of ${p.channel} within 10 s over ${transport}:${await explain()}`);
      }
      const l = await log();
      assert.deepStrictEqual(l[list][l[list].length - 1].doc, p.expected.get(want), `${what}: the doc of ${p.channel} at ${want}`);
    };
    const reachB = (what) => reach(pubB.current, what, 'others', pubB);
    const wire = async () => (await log()).wirePatches;

    await reach(pub.current, 'the first doc');
    await reachB('the first doc');
    await gw.subscribed(2);

    // patches: every edit as a patch
    const edits = 8;
    for (let i = 0; i < edits; i++) {
      pub.step();
      await reach(pub.current, `edit ${i + 1}`);
      if (i % 2) { pubB.step(); await reachB(`edit ${i + 1}`); }
    }
    assert.strictEqual(await wire(), edits, `each edit is to come as a patch:${await explain()}`);

    // restart: two versions while the gateway is down, then patches again
    await gw.stop();
    await page.waitForFunction(() => window.__log.statuses.includes('reconnecting'), { timeout: 10000 });
    pub.step();
    pub.step();
    pubB.step();
    await gw.start();
    await reach(pub.current, 'after the gateway restarted');
    await reachB('after the gateway restarted');
    await gw.subscribed(2);
    const otherBefore = (await log()).otherPatches;
    pubB.step();
    await reachB('a patch after the restart');
    assert.strictEqual((await log()).otherPatches, otherBefore + 1, `the second channel's patches after the restart:${await explain()}`);
    const beforeAfterRestart = await wire();
    for (let i = 0; i < 3; i++) { pub.step(); await reach(pub.current, `edit ${i + 1} after the restart`); }
    assert.strictEqual(await wire(), beforeAfterRestart + 3, `patches after the restart:${await explain()}`);

    // drop: the page loses one patch; the next one does not fit and the doc is read
    await page.evaluate(() => { window.__dropNextPatch = true; });
    pub.step();
    const lost = pub.current;
    await page.waitForFunction(() => window.__log.dropped === 1, { timeout: 10000 });
    pub.step();
    await reach(pub.current, 'after a dropped patch');
    let l = await log();
    assert.strictEqual(l.reads.length, 1, `one read of the whole doc:${await explain()}`);
    assert.ok(l.reads[0].endsWith(`/v1/docs/${encodeURIComponent(channel)}`), l.reads[0]);
    assert.ok(!l.docs.some((d) => d.version === lost), 'the dropped version was not delivered');
    pub.step();
    await reach(pub.current, 'a patch after the read');
    l = await log();
    assert.strictEqual(l.docs[l.docs.length - 1].patched, true, 'patches go on after the read');

    // missed: a version only in the key, never published: the next patch's base is unknown downstream
    pub.step({ quiet: true });
    pub.step();
    await reach(pub.current, 'after a version that was never published');
    pub.step();
    await reach(pub.current, 'a patch after the missed version');

    l = await log();
    for (const d of l.docs) {
      assert.deepStrictEqual(d.doc, pub.expected.get(d.version), `the doc delivered at ${d.version}`);
    }
    for (let i = 1; i < l.docs.length; i++) {
      assert.ok(compareVersions(l.docs[i].version, l.docs[i - 1].version) > 0, `${l.docs[i].version} after ${l.docs[i - 1].version}`);
    }
    for (const d of l.others) {
      assert.deepStrictEqual(d.doc, pubB.expected.get(d.version), `the doc of ${other} delivered at ${d.version}`);
    }
    assert.ok(l.otherPatches >= edits / 2 + 1, `only ${l.otherPatches} patches of ${other}:${await explain()}`);
    const patched = l.docs.filter((d) => d.patched).length;
    assert.ok(patched >= edits + 3, `only ${patched} docs made from patches:${await explain()}`);
    assert.deepStrictEqual(l.errors, [], `errors:${await explain()}`);
    assert.deepStrictEqual(pageErrors, []);
    console.log(`${transport}: ${l.docs.length} versions delivered, ${l.wirePatches} patch messages (${patched} applied), ` +
      `${l.reads.length} read of the whole doc; ${other}: ${l.others.length} versions, ${l.otherPatches} patch messages; ` +
      `statuses ${l.statuses.join(' ')}`);
    await page.evaluate(() => window.__client.close());
  } finally {
    await browser.close();
    await gw.stop();
  }
});

// Unit tests of worker/gateway/assets/docsync-client.js: its pure parts (versions, cursors,
// backoff, tokens) and the client's behaviour over fake WebSocket and EventSource classes (resume,
// dropping old versions, token refresh, refused channels). Run: node --test tests/browser/
'use strict';
const { test, describe } = require('node:test');
const assert = require('node:assert');
const DocsyncClient = require('../../worker/gateway/assets/docsync-client.js');
const { tick, until, FakeWebSocket, FakeEventSource, client, recorder } = require('./fakes.js');

const {
  parseVersion, formatVersion, versionOf, compareVersions, newerThan, buildCursor, parseCursor,
  backoffDelay, decodeTokenPayload, tokenExpiry, refreshDelay,
} = DocsyncClient;

const b64u = (s) => Buffer.from(s).toString('base64url');
const jwt = (payload) => `${b64u('{"alg":"HS256","typ":"JWT"}')}.${b64u(JSON.stringify(payload))}.c2ln`;
const env = (channel, doc, generation, lsn) => ({ channel, doc, generation, lsn });

describe('versions', () => {
  test('parse and format', () => {
    assert.deepStrictEqual(parseVersion('1/0/16B3F28'), { generation: 1, hi: 0, lo: 0x16B3F28 });
    assert.deepStrictEqual(parseVersion('12/FFFFFFFF/ffffffff'), { generation: 12, hi: 0xFFFFFFFF, lo: 0xFFFFFFFF });
    for (const bad of ['', '1/0', '0/16B3F28', 'a/0/1', '1/0/1/2', '1/0/G', '1/123456789/0', '-1/0/1', ' 1/0/1', null, 42]) {
      assert.strictEqual(parseVersion(bad), null, JSON.stringify(bad));
    }
    assert.strictEqual(formatVersion(parseVersion('3/a/00ff')), '3/A/FF');
    assert.strictEqual(formatVersion(versionOf(env('db:x:1', {}, 2, '1/2AB'))), '2/1/2AB');
    assert.strictEqual(formatVersion(versionOf({ version: '4/0/10' })), '4/0/10');
    assert.strictEqual(versionOf({ generation: 1, lsn: 'nope' }), null);
    assert.strictEqual(versionOf({ generation: '1', lsn: '0/1' }), null);
  });

  test('compare: generation first, then the LSN as a 64-bit number, not as text', () => {
    assert.strictEqual(compareVersions('1/0/16B3F28', '1/0/16B3F28'), 0);
    assert.strictEqual(compareVersions('1/0/9', '1/0/10'), -1);          // text would say 9 > 10
    assert.strictEqual(compareVersions('1/0/FFFFFFFF', '1/1/0'), -1);    // the high half counts first
    assert.strictEqual(compareVersions('1/A/0', '1/9/FFFFFFFF'), 1);
    assert.strictEqual(compareVersions('1/0/abc', '1/0/ABC'), 0);        // hex case does not matter
    assert.strictEqual(compareVersions('2/0/1', '1/FFFFFFFF/FFFFFFFF'), 1);  // a new generation wins
    assert.strictEqual(compareVersions('9/0/1', '10/0/0'), -1);
    assert.strictEqual(compareVersions(null, '1/0/0'), -1);
    assert.strictEqual(compareVersions('1/0/0', null), 1);
    assert.strictEqual(compareVersions(null, null), 0);
    assert.strictEqual(compareVersions(parseVersion('1/0/2'), '1/0/1'), 1);
  });

  test('newerThan drops versions at or below the last one', () => {
    assert.strictEqual(newerThan('1/0/10', null), true);
    assert.strictEqual(newerThan('1/0/10', '1/0/10'), false);
    assert.strictEqual(newerThan('1/0/F', '1/0/10'), false);
    assert.strictEqual(newerThan('1/0/11', '1/0/10'), true);
    assert.strictEqual(newerThan('garbage', null), false);
  });
});

describe('cursors', () => {
  test('one channel: its version', () => {
    assert.strictEqual(buildCursor(['db:a:1'], { 'db:a:1': '1/0/10' }), '1/0/10');
    assert.strictEqual(buildCursor(['db:a:1'], new Map([['db:a:1', null]])), null);
    assert.deepStrictEqual([...parseCursor('1/0/10', ['db:a:1'])], [['db:a:1', '1/0/10']]);
  });

  test('several channels: versions in request order, - for none', () => {
    const versions = new Map([['db:a:1', '1/0/10'], ['db:a:3', '2/0/5']]);
    assert.strictEqual(buildCursor(['db:a:1', 'db:a:2', 'db:a:3'], versions), '1/0/10,-,2/0/5');
    assert.strictEqual(buildCursor(['db:a:3', 'db:a:1'], versions), '2/0/5,1/0/10');
    assert.strictEqual(buildCursor(['db:a:2', 'db:a:4'], versions), null);
    assert.deepStrictEqual([...parseCursor('1/0/10,-,2/0/5', ['db:a:1', 'db:a:2', 'db:a:3'])],
      [['db:a:1', '1/0/10'], ['db:a:2', null], ['db:a:3', '2/0/5']]);
    // channels may hold commas: the cursor lists versions only
    assert.strictEqual(buildCursor(['db:a,b:1', 'db:c:2'], { 'db:a,b:1': '1/0/1' }), '1/0/1,-');
  });

  test('a cursor that does not fit is refused', () => {
    assert.strictEqual(parseCursor('1/0/10,-', ['db:a:1']), null);
    assert.strictEqual(parseCursor('1/0/10', ['db:a:1', 'db:a:2']), null);
    assert.strictEqual(parseCursor('-', ['db:a:1']), null);
    assert.strictEqual(parseCursor('x,1/0/1', ['db:a:1', 'db:a:2']), null);
    assert.strictEqual(parseCursor(undefined, ['db:a:1']), null);
  });
});

describe('backoff', () => {
  test('between half and all of 250 ms doubling, at most 10 s', () => {
    const caps = [250, 500, 1000, 2000, 4000, 8000, 10000, 10000, 10000];
    caps.forEach((cap, attempt) => {
      assert.strictEqual(backoffDelay(attempt, 250, 10000, () => 0), cap / 2, `attempt ${attempt}, low`);
      assert.strictEqual(backoffDelay(attempt, 250, 10000, () => 0.999999), cap, `attempt ${attempt}, high`);
      for (let i = 0; i < 50; i++) {
        const d = backoffDelay(attempt);
        assert.ok(d >= cap / 2 && d <= cap, `attempt ${attempt}: ${d} outside [${cap / 2}, ${cap}]`);
      }
    });
    assert.strictEqual(backoffDelay(1e6, 250, 10000, () => 1), 10000);  // no overflow
  });

  test('jitter spreads the delays', () => {
    const seen = new Set();
    for (let i = 0; i < 20; i++) seen.add(backoffDelay(5));
    assert.ok(seen.size > 5, `only ${seen.size} distinct delays`);
  });
});

describe('tokens', () => {
  test('the payload is read without verifying', () => {
    const t = jwt({ exp: 1700000000, channels: ['db:order:*', 'db:é:1'] });
    assert.deepStrictEqual(decodeTokenPayload(t), { exp: 1700000000, channels: ['db:order:*', 'db:é:1'] });
    assert.strictEqual(tokenExpiry(t), 1700000000);
    assert.strictEqual(tokenExpiry(jwt({ channels: [] })), null);
    assert.strictEqual(decodeTokenPayload('not a token'), null);
    assert.strictEqual(decodeTokenPayload('a.!!!.c'), null);
    assert.strictEqual(tokenExpiry(undefined), null);
  });

  test('refresh: 30 s before exp, or halfway when less is left', () => {
    const now = 1000000000000;
    assert.strictEqual(refreshDelay(now / 1000 + 3600, now, 30000), 3570000);
    assert.strictEqual(refreshDelay(now / 1000 + 40, now, 30000), 20000);
    assert.strictEqual(refreshDelay(now / 1000 + 2, now, 30000), 1000);
    assert.strictEqual(refreshDelay(now / 1000 - 5, now, 30000), 0);
    assert.strictEqual(refreshDelay(now / 1000 + 10 * 365 * 86400, now, 30000), 2147483647);  // a timer's limit
  });
});


// ---- the client over fakes ------------------------------------------------------------------------

describe('client over WebSocket', () => {
  test('subscribes, delivers, drops old versions and resumes with after', async () => {
    const c = client({ token: 'T1' });
    const h = recorder();
    const sub = c.subscribe('db:order:42', h);
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    const ws = FakeWebSocket.last();
    assert.strictEqual(ws.url, 'ws://gw.test:8080/v1/ws?token=T1&patches=1');
    assert.deepStrictEqual(c.statuses, ['connecting']);
    ws.open();
    assert.deepStrictEqual(ws.sent, [{ type: 'subscribe', channel: 'db:order:42' }]);
    assert.strictEqual(c.status, 'open');
    ws.push({ type: 'subscribed', channel: 'db:order:42' });
    ws.push({ type: 'doc', version: '1/0/20', channel: 'db:order:42', doc: { v: 1 }, generation: 1, lsn: '0/20' });
    ws.push({ type: 'doc', version: '1/0/20', channel: 'db:order:42', doc: { v: 1 }, generation: 1, lsn: '0/20' });  // duplicate
    ws.push({ type: 'doc', version: '1/0/1F', channel: 'db:order:42', doc: { v: 0 }, generation: 1, lsn: '0/1F' });  // older
    ws.push({ type: 'doc', version: '1/0/100', channel: 'db:order:42', doc: null, generation: 1, lsn: '0/100' });   // 100 > 20 as numbers
    ws.push({ type: 'doc', version: '1/0/1', channel: 'db:other:1', doc: {}, generation: 1, lsn: '0/1' });          // not subscribed
    assert.deepStrictEqual(h.versions(), ['1/0/20', '1/0/100']);
    assert.deepStrictEqual(h.got[1], { doc: null, channel: 'db:order:42', version: '1/0/100', generation: 1, lsn: '0/100', deleted: true });

    ws.serverClose();  // lost: reconnect, resume after the last version
    assert.strictEqual(c.status, 'reconnecting');
    await until(() => FakeWebSocket.all.length === 2, 'a reconnect');
    const ws2 = FakeWebSocket.last();
    ws2.open();
    assert.deepStrictEqual(ws2.sent, [{ type: 'subscribe', channel: 'db:order:42', after: '1/0/100' }]);
    // another gateway that sends an older version anyway: dropped
    ws2.push({ type: 'doc', version: '1/0/50', channel: 'db:order:42', doc: { v: 9 }, generation: 1, lsn: '0/50' });
    ws2.push({ type: 'doc', version: '2/0/1', channel: 'db:order:42', doc: { v: 2 }, generation: 2, lsn: '0/1' });
    assert.deepStrictEqual(h.versions(), ['1/0/20', '1/0/100', '2/0/1']);
    assert.deepStrictEqual(c.statuses, ['connecting', 'open', 'reconnecting', 'open']);

    sub.unsubscribe();
    assert.deepStrictEqual(ws2.sent[1], { type: 'unsubscribe', channel: 'db:order:42' });
    c.close();
    assert.strictEqual(c.status, 'closed');
    assert.ok(ws2.closed);
  });

  test('a second handler gets the current doc at once', async () => {
    const c = client({});
    const a = recorder(), b = recorder();
    c.subscribe('db:order:1', a);
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    const ws = FakeWebSocket.last();
    assert.strictEqual(ws.url, 'ws://gw.test:8080/v1/ws?patches=1');  // no token: public channels only
    ws.open();
    ws.push({ type: 'doc', channel: 'db:order:1', doc: { v: 1 }, generation: 1, lsn: '0/10' });
    c.subscribe('db:order:1', b);
    assert.strictEqual(ws.sent.length, 1, 'no second subscribe message');
    await tick(5);
    assert.deepStrictEqual(b.versions(), ['1/0/10']);
    ws.push({ type: 'doc', channel: 'db:order:1', doc: { v: 2 }, generation: 1, lsn: '0/11' });
    assert.deepStrictEqual(a.versions(), ['1/0/10', '1/0/11']);
    assert.deepStrictEqual(b.versions(), ['1/0/10', '1/0/11']);
    c.close();
  });

  test('forbidden: reported, that channel alone is not retried', async () => {
    const c = client({ token: 'T' });
    const ok = recorder(), no = recorder();
    c.subscribe('db:order:1', ok);
    c.subscribe('db:secret:1', no);
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    const ws = FakeWebSocket.last();
    ws.open();
    ws.push({ type: 'error', error: 'forbidden', channel: 'db:secret:1', message: 'not in the token' });
    assert.deepStrictEqual(c.errors, [{ error: 'forbidden', channel: 'db:secret:1', message: 'not in the token' }]);
    ws.serverClose();
    await until(() => FakeWebSocket.all.length === 2, 'a reconnect');
    FakeWebSocket.last().open();
    assert.deepStrictEqual(FakeWebSocket.last().sent, [{ type: 'subscribe', channel: 'db:order:1' }]);
    c.close();
  });

  test('getToken: at every connect, again before exp (sent as auth), and after token_expired', async () => {
    let n = 0;
    const exp = () => Math.floor(Date.now() / 1000) + 2;  // refreshed after about 1 s
    const c = client({ getToken: async () => jwt({ exp: exp(), n: ++n }), refreshMargin: 30000 });
    c.subscribe('db:order:1', recorder());
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    const ws = FakeWebSocket.last();
    assert.strictEqual(decodeTokenPayload(new URL(ws.url).searchParams.get('token')).n, 1);
    ws.open();
    await until(() => ws.sent.some((m) => m.type === 'auth'), 'an auth message', 3000);
    const auth = ws.sent.find((m) => m.type === 'auth');
    assert.strictEqual(decodeTokenPayload(auth.token).n, 2);
    ws.push({ type: 'error', error: 'token_expired', message: 'expired' });
    await until(() => FakeWebSocket.all.length === 2, 'a reconnect');
    assert.strictEqual(decodeTokenPayload(new URL(FakeWebSocket.last().url).searchParams.get('token')).n, 3);
    assert.ok(ws.closed, 'the old socket is closed');
    c.close();
  });

  test('a fixed token refused: reported, the client stops until setToken', async () => {
    const c = client({ token: 'OLD' });
    c.subscribe('db:order:1', recorder());
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    FakeWebSocket.last().open();
    FakeWebSocket.last().push({ type: 'error', error: 'token_expired', message: 'expired' });
    assert.strictEqual(c.status, 'closed');
    await tick(60);
    assert.strictEqual(FakeWebSocket.all.length, 1, 'no reconnect with the refused token');
    c.setToken('NEW');
    await until(() => FakeWebSocket.all.length === 2, 'a reconnect');
    assert.strictEqual(FakeWebSocket.last().url, 'ws://gw.test:8080/v1/ws?token=NEW&patches=1');
    c.close();
  });

  test('a refused upgrade with a fixed token past its exp: reported, the client stops', async () => {
    const c = client({ token: jwt({ exp: Math.floor(Date.now() / 1000) - 10, channels: ['db:*'] }) });
    c.subscribe('db:order:1', recorder());
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    FakeWebSocket.last().serverClose();  // never opened, and the gateway cannot be asked why
    await until(() => c.status === 'closed', 'closed');
    assert.deepStrictEqual(c.errors.map((e) => e.error), ['token_expired']);
    await tick(40);
    assert.strictEqual(FakeWebSocket.all.length, 1);
    c.close();
  });

  test('a refused upgrade: the reason is asked of the SSE endpoint', async () => {
    const fetched = [];
    const fetch = async (url) => {
      fetched.push(new URL(url));
      return { ok: false, status: 401, json: async () => ({ error: 'invalid_token', message: 'bad signature' }) };
    };
    const c = client({ token: 'BAD', fetch });
    c.subscribe('db:order:1', recorder());
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    FakeWebSocket.last().serverClose();  // never opened
    await until(() => c.status === 'closed', 'closed');
    assert.deepStrictEqual(c.errors, [{ error: 'invalid_token', channel: null, message: 'bad signature' }]);
    assert.strictEqual(fetched[0].pathname, '/v1/sse');
    assert.deepStrictEqual(fetched[0].searchParams.getAll('channel'), ['db:order:1']);
    assert.strictEqual(fetched[0].searchParams.get('token'), 'BAD');
    await tick(40);
    assert.strictEqual(FakeWebSocket.all.length, 1);
    c.close();
  });

  test('reconnects back off, and a stable connection resets the backoff', async () => {
    const c = client({ reconnectDelay: 10, maxReconnectDelay: 80, stableAfter: 30 });
    c.subscribe('db:order:1', recorder());
    const times = [];
    for (let i = 0; i < 6; i++) {
      await until(() => FakeWebSocket.all.length === i + 1, `attempt ${i + 1}`);
      times.push(Date.now());
      FakeWebSocket.last().serverClose();  // refused at once
    }
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    // caps 10, 20, 40, 80, 80: each gap at least half its cap (timers may fire a ms early)
    [5, 10, 20, 40, 40].forEach((min, i) => assert.ok(gaps[i] >= min - 2, `gap ${i} ${gaps[i]} ms < ${min}: ${gaps}`));
    await until(() => FakeWebSocket.all.length === 7, 'attempt 7');
    FakeWebSocket.last().open();
    await tick(40);  // stable
    const before = Date.now();
    FakeWebSocket.last().serverClose();
    await until(() => FakeWebSocket.all.length === 8, 'attempt 8');
    // the first retry again (at most 10 ms), not the sixth (40 ms at least)
    assert.ok(Date.now() - before < 38, `after a stable connection the first retry waited ${Date.now() - before} ms`);
    c.close();
  });
});

describe('client over SSE', () => {
  test('one stream for all channels, reopened with the cursor when the set changes', async () => {
    const c = client({ transport: 'sse', token: 'T' });
    const a = recorder(), b = recorder();
    c.subscribe('db:order:1', a);
    c.subscribe('db:order:2', b);
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    const es = FakeEventSource.last();
    assert.deepStrictEqual(es.u.searchParams.getAll('channel'), ['db:order:1', 'db:order:2']);
    assert.strictEqual(es.u.searchParams.get('token'), 'T');
    assert.strictEqual(es.u.searchParams.get('last-event-id'), null);
    assert.strictEqual(es.u.pathname, '/v1/sse');
    es.open();
    es.doc(env('db:order:2', { v: 1 }, 1, '0/A'));
    es.doc(env('db:order:2', { v: 0 }, 1, '0/9'));
    assert.deepStrictEqual(b.versions(), ['1/0/A']);

    const c3 = recorder();
    const s3 = c.subscribe('db:order:3', c3);
    await until(() => FakeEventSource.all.length === 2, 'a reopened stream');
    assert.ok(es.closed);
    const es2 = FakeEventSource.last();
    assert.deepStrictEqual(es2.u.searchParams.getAll('channel'), ['db:order:1', 'db:order:2', 'db:order:3']);
    assert.strictEqual(es2.u.searchParams.get('last-event-id'), '-,1/0/A,-');
    es2.open();
    es2.doc(env('db:order:2', { v: 1 }, 1, '0/A'));  // replayed: dropped
    es2.doc(env('db:order:1', { v: 1 }, 1, '0/B'));
    assert.deepStrictEqual(b.versions(), ['1/0/A']);
    assert.deepStrictEqual(a.versions(), ['1/0/B']);

    s3.unsubscribe();
    await until(() => FakeEventSource.all.length === 3, 'a stream without db:order:3');
    assert.deepStrictEqual(FakeEventSource.last().u.searchParams.getAll('channel'), ['db:order:1', 'db:order:2']);
    assert.strictEqual(FakeEventSource.last().u.searchParams.get('last-event-id'), '1/0/B,1/0/A');

    FakeEventSource.last().open();
    FakeEventSource.last().fail();  // lost: closed here (not left to reconnect by itself), reopened
    assert.ok(FakeEventSource.last().closed);
    assert.strictEqual(c.status, 'reconnecting');
    await until(() => FakeEventSource.all.length === 4, 'a reconnect');
    c.close();
    assert.ok(FakeEventSource.last().closed);
  });

  test('a single channel resumes with its version as the cursor', async () => {
    const c = client({ transport: 'sse' });
    c.subscribe('db:order:1', recorder());
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    FakeEventSource.last().open();
    FakeEventSource.last().doc(env('db:order:1', {}, 3, '1/FF'));
    FakeEventSource.last().fail();
    await until(() => FakeEventSource.all.length === 2, 'a reconnect');
    assert.strictEqual(FakeEventSource.last().u.searchParams.get('last-event-id'), '3/1/FF');
    assert.strictEqual(FakeEventSource.last().u.searchParams.get('token'), null);
    c.close();
  });

  test('a refused stream: the reason is fetched; a forbidden channel is dropped from the stream', async () => {
    const fetched = [];
    const fetch = async (url) => {
      fetched.push(url);
      const channels = new URL(url).searchParams.getAll('channel');
      if (channels.includes('db:secret:1')) {
        return { ok: false, status: 403, json: async () => ({ error: 'forbidden', channel: 'db:secret:1', message: 'no' }) };
      }
      return { ok: true, status: 200, json: async () => ({}) };
    };
    const c = client({ transport: 'sse', token: 'T', fetch });
    c.subscribe('db:order:1', recorder());
    c.subscribe('db:secret:1', recorder());
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    FakeEventSource.last().fail();  // never opened: refused
    await until(() => FakeEventSource.all.length === 2, 'a stream without the forbidden channel');
    assert.strictEqual(fetched.length, 1);
    assert.deepStrictEqual(c.errors.map((e) => [e.error, e.channel]), [['forbidden', 'db:secret:1']]);
    assert.deepStrictEqual(FakeEventSource.last().u.searchParams.getAll('channel'), ['db:order:1']);
    c.close();
  });

  test('a page of another origin the gateway does not allow: one cors error naming the flag, retried', async () => {
    const saved = Object.getOwnPropertyDescriptor(globalThis, 'location');
    Object.defineProperty(globalThis, 'location', { value: { origin: 'http://app.test:8000' }, configurable: true });
    try {
      const modes = [];
      // the browser withholds every answer from this page; a no-cors request still reaches the gateway
      const fetch = async (url, init) => {
        modes.push([new URL(url).pathname, init && init.mode]);
        if (init && init.mode === 'no-cors') return { ok: false, status: 0, type: 'opaque' };
        throw new TypeError('Failed to fetch');
      };
      const c = client({ transport: 'sse', fetch });
      c.subscribe('db:order:1', recorder());
      await until(() => FakeEventSource.all.length === 1, 'a stream');
      FakeEventSource.last().fail();
      await until(() => FakeEventSource.all.length === 2, 'a retry');
      FakeEventSource.last().fail();
      await until(() => FakeEventSource.all.length === 3, 'another retry');
      assert.deepStrictEqual(c.errors.map((e) => e.error), ['cors'], 'reported once');
      assert.match(c.errors[0].message, /CORS/);
      assert.match(c.errors[0].message, /--allow-origin http:\/\/app\.test:8000/);
      assert.deepStrictEqual(modes.slice(0, 2), [['/v1/sse', undefined], ['/healthz', 'no-cors']]);
      FakeEventSource.last().open();
      assert.strictEqual(c.status, 'open');
      c.close();
      // a gateway that is down is not blamed on CORS
      const down = client({ transport: 'sse', fetch: async () => { throw new TypeError('Failed to fetch'); } });
      down.subscribe('db:order:1', recorder());
      await until(() => FakeEventSource.all.length === 1, 'a stream');
      FakeEventSource.last().fail();
      await until(() => FakeEventSource.all.length === 2, 'a retry');
      assert.deepStrictEqual(down.errors, []);
      down.close();
    } finally {
      if (saved) Object.defineProperty(globalThis, 'location', saved); else delete globalThis.location;
    }
  });

  test('a stream refused as a whole (400 without a channel): not retried until the set changes', async () => {
    const fetch = async () => ({ ok: false, status: 400, json: async () => ({ error: 'too_many_channels', message: '3 channels asked for' }) });
    const c = client({ transport: 'sse', fetch });
    c.subscribe('db:order:1', recorder());
    c.subscribe('db:order:2', recorder());
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    FakeEventSource.last().fail();
    await until(() => c.status === 'closed', 'closed');
    await tick(40);
    assert.strictEqual(FakeEventSource.all.length, 1);
    assert.deepStrictEqual(c.errors.map((e) => [e.error, e.channel]), [['too_many_channels', null]]);
    c.subscribe('db:order:3', recorder());
    await until(() => FakeEventSource.all.length === 2, 'a stream for the new set');
    c.close();
  });

  test('token_expired mid-stream: closed here, reopened with a fresh token', async () => {
    let n = 0;
    const c = client({ transport: 'sse', getToken: async () => jwt({ exp: Math.floor(Date.now() / 1000) + 3600, n: ++n }) });
    const h = recorder();
    c.subscribe('db:order:1', h);
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    const es = FakeEventSource.last();
    es.open();
    es.doc(env('db:order:1', { v: 1 }, 1, '0/10'));
    es.serverError({ error: 'token_expired', message: 'the token expired' });
    assert.ok(es.closed, 'closed before the EventSource could reconnect with the old token');
    await until(() => FakeEventSource.all.length === 2, 'a reopened stream');
    const u = FakeEventSource.last().u;
    assert.strictEqual(decodeTokenPayload(u.searchParams.get('token')).n, 2);
    assert.strictEqual(u.searchParams.get('last-event-id'), '1/0/10');
    assert.deepStrictEqual(c.errors.map((e) => e.error), ['token_expired']);
    c.close();
  });

  test('a refreshed token reopens the stream', async () => {
    let n = 0;
    const c = client({ transport: 'sse', getToken: async () => jwt({ exp: Math.floor(Date.now() / 1000) + 2, n: ++n }) });
    c.subscribe('db:order:1', recorder());
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    FakeEventSource.last().open();
    await until(() => FakeEventSource.all.length === 2, 'a stream with the refreshed token', 3000);
    assert.ok(FakeEventSource.all[0].closed);
    assert.strictEqual(decodeTokenPayload(FakeEventSource.last().u.searchParams.get('token')).n, 2);
    c.close();
  });

  test('no channel left: no stream', async () => {
    const c = client({ transport: 'sse' });
    const s = c.subscribe('db:order:1', recorder());
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    FakeEventSource.last().open();
    s.unsubscribe();
    await tick(5);
    assert.ok(FakeEventSource.last().closed);
    assert.strictEqual(c.status, 'closed');
    assert.strictEqual(FakeEventSource.all.length, 1);
    c.close();
  });
});

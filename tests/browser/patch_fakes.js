// What the client's patch tests share: messages of one channel at versions named by a number, a
// fetch the test answers by hand, and a client subscribed over a fake WebSocket with patches on.
'use strict';
const { tick, until, FakeWebSocket, client, recorder } = require('./fakes.js');

const C = 'db:board:7';
const V = (n) => `1/0/${n.toString(16).toUpperCase()}`;
const lsn = (n) => `0/${n.toString(16).toUpperCase()}`;
const docEnv = (n, doc) => ({ channel: C, doc, generation: 1, lsn: lsn(n) });
const patchEnv = (base, n, patch, form = 'patch') => ({ channel: C, [form]: patch, base_generation: 1, base_lsn: lsn(base), generation: 1, lsn: lsn(n) });
const wsDoc = (n, doc) => ({ type: 'doc', version: V(n), ...docEnv(n, doc) });
const wsPatch = (base, n, patch, form) => ({ type: 'patch', version: V(n), base: V(base), ...patchEnv(base, n, patch, form) });

// A fetch the test answers by hand: each call waits until answer() or fail().
function fakeFetch() {
  const calls = [];
  const fn = (url, init) => new Promise((resolve, reject) => {
    calls.push({ url, init, resolve, reject });
  });
  fn.calls = calls;
  fn.answer = async (status, body) => {
    await until(() => calls.some((c) => !c.done), 'a read');
    const c = calls.find((x) => !x.done);
    c.done = true;
    c.resolve({ status, ok: status >= 200 && status < 300, json: async () => body });
    await tick(1);
  };
  fn.fail = async (message) => {
    await until(() => calls.some((c) => !c.done), 'a read');
    const c = calls.find((x) => !x.done);
    c.done = true;
    c.reject(new TypeError(message));
    await tick(1);
  };
  return fn;
}

// A client subscribed to C over an open fake WebSocket, its handler recording what it delivers.
async function wsClient(opts = {}) {
  const fetch = fakeFetch();
  const c = client({ token: 'T', fetch, ...opts });
  const h = recorder();
  c.subscribe(C, h);
  await until(() => FakeWebSocket.all.length === 1, 'a socket');
  const ws = FakeWebSocket.last();
  ws.open();
  return { c, h, ws, fetch };
}

module.exports = { C, V, lsn, docEnv, patchEnv, wsDoc, wsPatch, fakeFetch, wsClient };

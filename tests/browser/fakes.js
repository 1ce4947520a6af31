// The fakes the client's unit tests run it over: WebSocket and EventSource classes the test drives
// by hand (open, push a message, close), a client made with them, and a handler that records what
// it is given.
'use strict';
const DocsyncClient = require('../../worker/gateway/assets/docsync-client.js');

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));
async function until(cond, what, ms = 2000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await tick(2);
  }
}

class FakeWebSocket {
  constructor(url) {
    this.url = url;
    this.sent = [];
    this.closed = false;
    FakeWebSocket.all.push(this);
  }
  open() { this.onopen && this.onopen({}); }
  send(text) { if (this.closed) throw new Error('closed'); this.sent.push(JSON.parse(text)); }
  push(msg) { this.onmessage && this.onmessage({ data: JSON.stringify(msg) }); }
  close() { this.closed = true; }
  serverClose() { this.closed = true; this.onclose && this.onclose({ code: 1006 }); }
  static last() { return FakeWebSocket.all[FakeWebSocket.all.length - 1]; }
}
FakeWebSocket.all = [];

class FakeEventSource {
  constructor(url) {
    this.url = url;
    this.u = new URL(url);
    this.listeners = {};
    this.closed = false;
    FakeEventSource.all.push(this);
  }
  addEventListener(type, fn) { (this.listeners[type] = this.listeners[type] || []).push(fn); }
  fire(type, ev) { (this.listeners[type] || []).forEach((fn) => fn(ev)); }
  open() { this.fire('open', {}); }
  doc(envelope) { this.fire('doc', { data: JSON.stringify(envelope) }); }
  serverError(body) { this.fire('stream-error', { data: JSON.stringify(body) }); }
  fail() { this.fire('error', {}); }
  close() { this.closed = true; }
  static last() { return FakeEventSource.all[FakeEventSource.all.length - 1]; }
}
FakeEventSource.all = [];

function client(opts) {
  FakeWebSocket.all = [];
  FakeEventSource.all = [];
  const c = new DocsyncClient({
    url: 'http://gw.test:8080/', WebSocket: FakeWebSocket, EventSource: FakeEventSource,
    reconnectDelay: 4, maxReconnectDelay: 20, fetch: async () => { throw new Error('offline'); }, ...opts,
  });
  c.statuses = [];
  c.errors = [];
  c.on('status', (s) => c.statuses.push(s));
  c.on('error', (e) => c.errors.push(e));
  return c;
}
function recorder() {
  const got = [];
  const fn = (doc, meta) => got.push({ doc, ...meta });
  fn.got = got;
  fn.versions = () => got.map((g) => g.version);
  return fn;
}

module.exports = { tick, until, FakeWebSocket, FakeEventSource, client, recorder };

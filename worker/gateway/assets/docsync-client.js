/*
 * docsync-client.js: follow docsync docs through docsync-gateway, over one WebSocket or one
 * EventSource. No dependencies; a plain <script src="/docsync-client.js"> defines
 * window.DocsyncClient, and `require('./docsync-client.js')` returns it in Node (which has no
 * EventSource, and no WebSocket before Node 22: pass them as options).
 *
 *   const client = new DocsyncClient({
 *     url: 'http://host:port',     // the gateway (default: the page's origin)
 *     transport: 'ws',             // 'ws' (default) or 'sse'
 *     token: 'JWT',                // a fixed token, or
 *     getToken: async () => 'JWT', // called at every connect and shortly before the token's exp
 *   });
 *   const sub = client.subscribe('db:order:42', (doc, meta) => { ... });
 *       doc   the doc's JSON value, null when the row is gone
 *       meta  {channel, version: 'G/X/Y', generation, lsn: 'X/Y', deleted: doc === null,
 *              patched: true when the doc was made from the previous one and a patch}
 *   sub.unsubscribe();
 *   client.on('status', (status) => ...);  'connecting' | 'open' | 'reconnecting' | 'closed'
 *   client.on('error', (e) => ...);        e = {error, channel (or null), message}
 *   client.off(event, fn);
 *   client.status;                         the last status
 *   client.setToken('JWT');                replaces a fixed token (and restarts a stopped client)
 *   client.close();                        final: drops the connection and every subscription
 *
 * Other options: patches (true: ask the gateway for patches, docs/patches.md; false: whole docs
 * only); WebSocket, EventSource, fetch (implementations to use instead of the globals);
 * reconnectDelay (250 ms) and maxReconnectDelay (10000 ms), the bounds of the backoff; stableAfter
 * (5000 ms), how long a connection must have been up for the backoff to start over; refreshMargin
 * (30000 ms), how long before the token's exp getToken is called again (at most half the token's
 * remaining life).
 *
 * What a handler sees:
 * - Versions only move forward: a doc whose version (generation, then LSN as a 64-bit number) is
 *   below the last one delivered for its channel is dropped, across reconnects and gateways; one
 *   at that version is dropped too unless it is a whole doc whose value differs (deep-compared):
 *   two computes of one version, the later the one the gateway holds, replaces the doc held and is
 *   delivered again at that version (a patch from that version then applies to it).
 * - A reconnect resumes where the client stopped: WS re-subscribes each channel with `after` set to
 *   its last version; SSE passes the cursor (each channel's version) as `last-event-id`.
 * - A second handler of a channel gets the channel's current doc at once (asynchronously).
 * - Reconnects back off exponentially with jitter (each delay between half and all of
 *   reconnectDelay doubled per failed attempt, at most maxReconnectDelay).
 * - With getToken, the token is fetched again before its exp (read from the JWT payload, not
 *   verified) and handed over (WS: an `auth` message; SSE: the stream is reopened with it); a token
 *   the gateway refuses is fetched again on the next connect. With a fixed token that the gateway
 *   refuses, the client reports the error and stops ('closed') until setToken.
 * - A channel the gateway defers (`deferred`: Redis holds no doc for it and the gateway's budget
 *   for asking the worker is spent) is reported and stays subscribed; its doc comes when it exists.
 * - A channel the gateway refuses (forbidden, bad_request, too_many_channels) is reported once and
 *   not retried; subscribe to it again to retry. An SSE request refused as a whole (too many
 *   channels, or a bad one the gateway does not name) is not retried until the channel set changes.
 *
 * - Patches (docs/patches.md): the client asks for them (`patches=1` on the SSE and WS URLs) unless
 *   made with `patches: false`. A patch message (SSE `event: patch`, WS `{"type":"patch"}`) carries
 *   a version, a base version and an RFC 6902 `patch` or an RFC 7386 `merge`. It is applied only
 *   when the channel's doc is held at exactly its base version; the result gets the patch's version
 *   (checked to be newer than the base) and reaches the handlers like a doc, with meta.patched. A
 *   patch at or below the last version delivered is dropped. On any mismatch (no doc held, another
 *   version held, the patch does not apply, a patch message without valid versions) the client
 *   reads the whole doc with GET /v1/docs/{channel} (the token as `Authorization: Bearer`, through
 *   options.fetch) and delivers it if newer. One read per channel at a time: patches that do not fit
 *   while it is under way wait for its answer (at most 64 per channel), then are applied on top if
 *   they fit or dropped if older, and a newer one that still does not fit starts one more read.
 *   Whole docs are delivered meanwhile as always. A read that fails (network, 5xx, 429, or 401 with
 *   getToken) is reported on `error` and tried again with the reconnect backoff; one refused
 *   otherwise (403, 400, 401 with a fixed token) is reported and dropped, and a 404 (no doc yet)
 *   ends it quietly. Applying never changes a value handed to a handler before: the new doc shares
 *   the untouched parts and copies every container on a changed path. The `copy` operations of one
 *   patch copy at most as much as the base doc and the patch hold (their JSON length, about); a
 *   patch that copies more is refused (bad_patch) and the whole doc read, never a doc that doubles
 *   with each copy until memory runs out.
 * - Errors carry the gateway's codes, plus token_unavailable (getToken failed), bad_message (a
 *   message that is not JSON, a doc or a patch without a valid version), bad_patch (a patch that does
 *   not apply to its base) and, for a read of the whole doc, the gateway's code of its answer,
 *   http_STATUS, or unavailable (the gateway could not be reached). A browser shows a refused WebSocket
 *   upgrade as a bare close: the client then asks the SSE endpoint, which checks the token the same
 *   way and answers in JSON, for the reason.
 *
 * Statuses: 'connecting' while a connection is being opened (the first one, or a deliberate reopen:
 * a new token or a new channel set over SSE), 'open' when it is up, 'reconnecting' after it was lost
 * (until it is up again), 'closed' when the client holds none: after close(), when an SSE client
 * follows no channel (or its request was refused as a whole), or when a fixed token was refused.
 *
 * The pure parts are exported as static members (parseVersion, compareVersions, formatVersion,
 * versionOf, baseVersionOf, buildCursor, parseCursor, backoffDelay, decodeTokenPayload, tokenExpiry,
 * refreshDelay, newerThan, and the patch functions: applyJsonPatch(doc, patch) for RFC 6902 (all six
 * ops), applyMergePatch(doc, patch) for RFC 7386, jsonEqual(a, b) and parsePointer(pointer) for
 * RFC 6901; they never change their arguments, and an invalid patch throws an Error named
 * PatchError whose message names the operation's index, op and path).
 */
(function (root, factory) {
  'use strict';
  var DocsyncClient = factory();
  if (typeof module === 'object' && module && module.exports) module.exports = DocsyncClient;
  if (typeof window !== 'undefined') window.DocsyncClient = DocsyncClient;
  else if (root && typeof module !== 'object') root.DocsyncClient = DocsyncClient;
})(typeof globalThis !== 'undefined' ? globalThis : this, function () {
  'use strict';

  // ---- versions ------------------------------------------------------------------------------

  // 'G/X/Y' -> {generation, hi, lo} (numbers; X and Y are the two 32-bit hex halves of the LSN),
  // or null when the text is not a version.
  function parseVersion(text) {
    if (typeof text !== 'string') return null;
    var m = /^(\d{1,15})\/([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
    if (!m) return null;
    return { generation: Number(m[1]), hi: parseInt(m[2], 16), lo: parseInt(m[3], 16) };
  }

  function parseLsn(text) {
    if (typeof text !== 'string') return null;
    var m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
    return m ? { hi: parseInt(m[1], 16), lo: parseInt(m[2], 16) } : null;
  }

  function hex(n) { return n.toString(16).toUpperCase(); }

  // {generation, hi, lo} -> 'G/X/Y' (hex as PostgreSQL prints an LSN: upper case, no padding).
  function formatVersion(v) { return v.generation + '/' + hex(v.hi) + '/' + hex(v.lo); }

  // The version of an envelope ({generation, lsn}) or of a WS doc message ({version} as well), or
  // null.
  function versionOf(message) {
    if (!message || typeof message !== 'object') return null;
    if (typeof message.generation === 'number' && message.generation >= 0 &&
        Number.isSafeInteger(message.generation)) {
      var lsn = parseLsn(message.lsn);
      if (lsn) return { generation: message.generation, hi: lsn.hi, lo: lsn.lo };
    }
    return parseVersion(message.version);
  }

  // The base version of a patch message (base_generation and base_lsn, or a WS message's base), or
  // null.
  function baseVersionOf(message) {
    if (!message || typeof message !== 'object') return null;
    return versionOf({ generation: message.base_generation, lsn: message.base_lsn, version: message.base });
  }

  function asVersion(v) { return typeof v === 'string' ? parseVersion(v) : v || null; }

  // -1, 0 or 1 as a is older than, the same as or newer than b (versions or their text); no
  // version (null, or text that is not one) is older than every version.
  function compareVersions(a, b) {
    a = asVersion(a);
    b = asVersion(b);
    if (!a || !b) return a ? 1 : b ? -1 : 0;
    if (a.generation !== b.generation) return a.generation < b.generation ? -1 : 1;
    if (a.hi !== b.hi) return a.hi < b.hi ? -1 : 1;
    if (a.lo !== b.lo) return a.lo < b.lo ? -1 : 1;
    return 0;
  }

  // Whether `candidate` is to be delivered after `last` (the last version delivered, or null).
  function newerThan(candidate, last) {
    return !!asVersion(candidate) && compareVersions(candidate, last) > 0;
  }

  // ---- SSE cursors ----------------------------------------------------------------------------

  // The cursor of `channels` (in request order) given each one's last version (versions: a Map or
  // an object, channel -> 'G/X/Y' or null): one channel's version, or the versions joined with ','
  // ('-' for a channel without one); null when no channel has a version.
  function buildCursor(channels, versions) {
    var get = typeof versions.get === 'function' ? function (c) { return versions.get(c); }
                                                  : function (c) { return versions[c]; };
    var any = false;
    var parts = channels.map(function (c) {
      var v = get(c);
      if (v) { any = true; return v; }
      return '-';
    });
    if (!any) return null;
    return channels.length === 1 ? parts[0] : parts.join(',');
  }

  // The inverse: a Map channel -> 'G/X/Y' or null, or null when the cursor does not fit channels.
  function parseCursor(cursor, channels) {
    if (typeof cursor !== 'string' || !channels.length) return null;
    var parts = channels.length === 1 ? [cursor] : cursor.split(',');
    if (parts.length !== channels.length) return null;
    var out = new Map();
    for (var i = 0; i < parts.length; i++) {
      if (parts[i] === '-' && channels.length > 1) { out.set(channels[i], null); continue; }
      if (!parseVersion(parts[i])) return null;
      out.set(channels[i], parts[i]);
    }
    return out;
  }

  // ---- backoff and tokens ---------------------------------------------------------------------

  // The delay before reconnect attempt `attempt` (0 for the first): between half and all of
  // min(max, base * 2^attempt) milliseconds.
  function backoffDelay(attempt, base, max, random) {
    base = base == null ? 250 : base;
    max = max == null ? 10000 : max;
    random = random || Math.random;
    var cap = Math.min(max, base * Math.pow(2, Math.min(Math.max(attempt, 0), 30)));
    return Math.round(cap / 2 + random() * (cap / 2));
  }

  function base64UrlDecode(text) {
    var b64 = text.replace(/-/g, '+').replace(/_/g, '/');
    while (b64.length % 4) b64 += '=';
    var binary = atob(b64);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return new TextDecoder().decode(bytes);
  }

  // A JWT's payload (not verified: only the gateway can), or null when it is not one.
  function decodeTokenPayload(token) {
    if (typeof token !== 'string') return null;
    var parts = token.split('.');
    if (parts.length !== 3) return null;
    try {
      var payload = JSON.parse(base64UrlDecode(parts[1]));
      return payload && typeof payload === 'object' ? payload : null;
    } catch (e) {
      return null;
    }
  }

  // The token's exp (seconds since the epoch), or null.
  function tokenExpiry(token) {
    var p = decodeTokenPayload(token);
    return p && typeof p.exp === 'number' && isFinite(p.exp) ? p.exp : null;
  }

  var MAX_TIMER = 2147483647;  // setTimeout fires at once beyond 2^31 - 1 ms

  // Milliseconds from now (ms) until a token that expires at exp (seconds) is to be fetched again:
  // `margin` ms before exp, or halfway there when less than twice the margin is left.
  function refreshDelay(exp, now, margin) {
    margin = margin == null ? 30000 : margin;
    var left = exp * 1000 - now;
    if (left <= 0) return 0;
    return Math.min(MAX_TIMER, Math.round(left - Math.min(margin, left / 2)));
  }

  // ---- patches (RFC 6902 JSON Patch, RFC 7386 merge patch) -----------------------------------
  //
  // Pure: neither function changes its arguments or anything reachable from them. The result
  // shares every part of `doc` the patch does not touch, and each container on a changed path is a
  // copy (made once per call, then changed in place), so a doc handed to a handler before never
  // changes. Values taken from the patch are copied too.

  var MAX_DEPTH = 1000;  // deeper values are refused, not followed into a stack overflow (the worker
                         // sends no patch for a doc deeper than 256)

  function patchError(message, index, op) {
    var e = new Error(index == null ? message : 'operation ' + index + ' (' + op + '): ' + message);
    e.name = 'PatchError';
    if (index != null) e.index = index;
    return e;
  }

  var hasOwn = Object.prototype.hasOwnProperty;
  function isObject(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

  // obj[key] = value, also for the key "__proto__" (which JSON.parse makes an own property, and
  // plain assignment would take as the object's prototype).
  function setKey(obj, key, value) {
    if (key === '__proto__') Object.defineProperty(obj, key, { value: value, writable: true, enumerable: true, configurable: true });
    else obj[key] = value;
  }

  function shallowCopy(v) {
    if (Array.isArray(v)) return v.slice();
    var out = {};
    Object.keys(v).forEach(function (k) { setKey(out, k, v[k]); });
    return out;
  }

  // A deep copy of a JSON value; throws on anything JSON cannot hold.
  function cloneJson(v, depth) {
    depth = depth || 0;
    if (depth > MAX_DEPTH) throw patchError('a value nested deeper than ' + MAX_DEPTH);
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
    if (typeof v === 'number') {
      if (v !== v) throw patchError('NaN is not a JSON value');
      return v;
    }
    if (Array.isArray(v)) return v.map(function (x) { return cloneJson(x, depth + 1); });
    if (typeof v === 'object') {
      var out = {};
      Object.keys(v).forEach(function (k) { setKey(out, k, cloneJson(v[k], depth + 1)); });
      return out;
    }
    throw patchError('a ' + typeof v + ' is not a JSON value');
  }

  // Whether two JSON values are equal: numbers by value, objects by their keys in any order.
  function jsonEqual(a, b, depth) {
    depth = depth || 0;
    if (a === b) return true;
    if (depth > MAX_DEPTH) throw patchError('a value nested deeper than ' + MAX_DEPTH);
    if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
    if (Array.isArray(a) !== Array.isArray(b)) return false;
    if (Array.isArray(a)) {
      if (a.length !== b.length) return false;
      for (var i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i], depth + 1)) return false;
      return true;
    }
    var ka = Object.keys(a), kb = Object.keys(b);
    if (ka.length !== kb.length) return false;
    for (var j = 0; j < ka.length; j++) {
      if (!hasOwn.call(b, ka[j]) || !jsonEqual(a[ka[j]], b[ka[j]], depth + 1)) return false;
    }
    return true;
  }

  // jsonEqual for values from anywhere: one nested too deep for it counts as different.
  function sameJson(a, b) {
    try { return jsonEqual(a, b); } catch (e) { return false; }
  }

  // About the length of v's JSON text (strings and keys without their escapes), counted until it
  // passes `limit`: what the value costs in memory, walked without recursion.
  function jsonSize(v, limit) {
    var size = 0, stack = [v];
    while (stack.length) {
      var x = stack.pop();
      if (x === null || typeof x !== 'object') {
        size += typeof x === 'string' ? x.length + 2 : String(x).length;
      } else if (Array.isArray(x)) {
        size += 2 + x.length;
        for (var i = 0; i < x.length; i++) stack.push(x[i]);
      } else {
        var keys = Object.keys(x);
        size += 2 + keys.length;
        for (var j = 0; j < keys.length; j++) { size += keys[j].length + 3; stack.push(x[keys[j]]); }
      }
      if (size > limit) return size;
    }
    return size;
  }

  // A JSON Pointer (RFC 6901) -> its reference tokens ('' -> [], the whole doc).
  function parsePointer(pointer) {
    if (typeof pointer !== 'string') throw patchError('a JSON Pointer is a string, not ' + JSON.stringify(pointer));
    if (pointer === '') return [];
    if (pointer.charAt(0) !== '/') throw patchError('JSON Pointer ' + JSON.stringify(pointer) + ' does not start with "/"');
    return pointer.slice(1).split('/').map(function (t) {
      if (/~[^01]|~$/.test(t)) throw patchError('JSON Pointer ' + JSON.stringify(pointer) + ' has a "~" not followed by 0 or 1');
      return t.replace(/~1/g, '/').replace(/~0/g, '~');
    });
  }

  // The array index a token names: digits without a leading zero, below `limit` (at most `limit`
  // when `end` allows the end of the array, which '-' also names).
  function arrayIndex(token, length, end, pointer) {
    if (token === '-' && end) return length;
    if (!/^(0|[1-9][0-9]*)$/.test(token)) {
      throw patchError('JSON Pointer ' + JSON.stringify(pointer) + ': ' + JSON.stringify(token) + ' is not an array index' +
                       (token === '-' ? ' here (- names the end of an array only for add, and the target of move and copy)' : ''));
    }
    var i = Number(token);
    if (i > length || (i === length && !end)) {
      throw patchError('JSON Pointer ' + JSON.stringify(pointer) + ': index ' + token + ' is past the end of an array of ' + length);
    }
    return i;
  }

  // The value at `tokens` in `doc`; throws when there is none.
  function valueAt(doc, tokens, pointer) {
    var v = doc;
    for (var i = 0; i < tokens.length; i++) {
      if (Array.isArray(v)) v = v[arrayIndex(tokens[i], v.length, false, pointer)];
      else if (isObject(v) && hasOwn.call(v, tokens[i])) v = v[tokens[i]];
      else throw patchError('path ' + JSON.stringify(pointer) + ' does not exist');
    }
    return v;
  }

  // A JSON Patch applied with copy-on-write: `owned` holds the containers this call copied (and so
  // may change in place).
  function Patcher(doc, patch) {
    this.root = doc;
    this.owned = new Set();
    this.base = doc;
    this.patch = patch;
    // What `copy` operations may still copy: as much as the base doc and the patch hold (counted
    // by jsonSize when the first copy comes), as the gateway's applier allows. Each copy may
    // double the doc, so a patch of a few hundred bytes could otherwise exhaust memory.
    this.copyBudget = null;
  }

  Patcher.prototype.takeCopy = function (value) {
    if (this.copyBudget === null) this.copyBudget = jsonSize(this.base, Infinity) + jsonSize(this.patch, Infinity);
    var size = jsonSize(value, this.copyBudget);
    if (size > this.copyBudget) {
      throw patchError('the copies would pass their budget: the copy operations of a patch copy at most as much as ' +
                       'the base doc and the patch hold (a patch that copies more would exhaust memory)');
    }
    this.copyBudget -= size;
  };

  Patcher.prototype.own = function (v) {
    if (this.owned.has(v)) return v;
    var c = shallowCopy(v);
    this.owned.add(c);
    return c;
  };

  // The container that holds the last token of `tokens`, owned (copied along the path as needed).
  Patcher.prototype.parentOf = function (tokens, pointer) {
    if (this.root === null || typeof this.root !== 'object') throw patchError('path ' + JSON.stringify(pointer) + ' does not exist');
    this.root = this.own(this.root);
    var parent = this.root;
    for (var i = 0; i < tokens.length - 1; i++) {
      var t = tokens[i], child;
      if (Array.isArray(parent)) {
        var k = arrayIndex(t, parent.length, false, pointer);
        child = parent[k];
        if (child === null || typeof child !== 'object') throw patchError('path ' + JSON.stringify(pointer) + ' does not exist');
        parent = parent[k] = this.own(child);
      } else if (hasOwn.call(parent, t)) {
        child = parent[t];
        if (child === null || typeof child !== 'object') throw patchError('path ' + JSON.stringify(pointer) + ' does not exist');
        child = this.own(child);
        setKey(parent, t, child);
        parent = child;
      } else {
        throw patchError('path ' + JSON.stringify(pointer) + ' does not exist');
      }
    }
    return parent;
  };

  Patcher.prototype.add = function (tokens, value, pointer) {
    if (!tokens.length) { this.root = value; return; }
    var parent = this.parentOf(tokens, pointer);
    var last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) parent.splice(arrayIndex(last, parent.length, true, pointer), 0, value);
    else setKey(parent, last, value);
  };

  // Removes the value at `tokens` and returns it.
  Patcher.prototype.remove = function (tokens, pointer) {
    if (!tokens.length) throw patchError('the whole doc cannot be removed (replace it instead)');
    var old = valueAt(this.root, tokens, pointer);
    var parent = this.parentOf(tokens, pointer);
    var last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) parent.splice(arrayIndex(last, parent.length, false, pointer), 1);
    else delete parent[last];
    return old;
  };

  Patcher.prototype.replace = function (tokens, value, pointer) {
    valueAt(this.root, tokens, pointer);  // must exist
    if (!tokens.length) { this.root = value; return; }
    var parent = this.parentOf(tokens, pointer);
    var last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) parent[arrayIndex(last, parent.length, false, pointer)] = value;
    else setKey(parent, last, value);
  };

  function isPrefix(a, b) {  // a is a proper prefix of b
    if (a.length >= b.length) return false;
    for (var i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  Patcher.prototype.apply = function (op, index) {
    if (!isObject(op)) throw patchError('an operation is an object, not ' + JSON.stringify(op), index, '?');
    var name = op.op;
    try {
      if (typeof name !== 'string') throw patchError('no "op" member (add, remove, replace, move, copy or test)');
      if (!hasOwn.call(op, 'path')) throw patchError('no "path" member');
      var tokens = parsePointer(op.path);
      var needValue = name === 'add' || name === 'replace' || name === 'test';
      if (needValue && !hasOwn.call(op, 'value')) throw patchError('no "value" member');
      var from;
      if (name === 'move' || name === 'copy') {
        if (!hasOwn.call(op, 'from')) throw patchError('no "from" member');
        from = parsePointer(op.from);
      }
      switch (name) {
        case 'add': this.add(tokens, cloneJson(op.value), op.path); break;
        case 'remove': this.remove(tokens, op.path); break;
        case 'replace': this.replace(tokens, cloneJson(op.value), op.path); break;
        case 'move':
          if (isPrefix(from, tokens)) throw patchError('"from" ' + JSON.stringify(op.from) + ' is a parent of "path" ' + JSON.stringify(op.path));
          if (op.from === op.path) { valueAt(this.root, from, op.from); break; }
          this.add(tokens, this.remove(from, op.from), op.path);
          break;
        case 'copy':  // a copy, not the same value twice: a later operation may change one in place
          var copied = valueAt(this.root, from, op.from);
          this.takeCopy(copied);
          this.add(tokens, cloneJson(copied), op.path);
          break;
        case 'test':
          if (!jsonEqual(valueAt(this.root, tokens, op.path), op.value)) {
            throw patchError('the value at ' + JSON.stringify(op.path) + ' is not ' + JSON.stringify(op.value).slice(0, 200));
          }
          break;
        default:
          throw patchError('unknown op ' + JSON.stringify(name) + ' (add, remove, replace, move, copy or test)');
      }
    } catch (e) {
      if (e && e.name === 'PatchError' && e.index == null) throw patchError(e.message, index, typeof name === 'string' ? name : '?');
      throw e;
    }
  };

  // `doc` with the RFC 6902 JSON Patch `patch` (an array of operations) applied. Throws an Error
  // named PatchError, naming the operation and its path, when the patch does not apply; `doc` is
  // left as it was.
  function applyJsonPatch(doc, patch) {
    if (!Array.isArray(patch)) throw patchError('a JSON Patch is an array of operations, not ' + JSON.stringify(patch));
    var p = new Patcher(doc, patch);
    for (var i = 0; i < patch.length; i++) p.apply(patch[i], i);
    return p.root;
  }

  // `doc` with the RFC 7386 merge patch `patch` applied: an object patch merges member by member
  // (null removes a member), anything else replaces the doc.
  function applyMergePatch(doc, patch, depth) {
    depth = depth || 0;
    if (depth > MAX_DEPTH) throw patchError('a merge patch nested deeper than ' + MAX_DEPTH);
    if (patch === undefined) throw patchError('a merge patch is a JSON value, not undefined');
    if (!isObject(patch)) return cloneJson(patch);
    var out = isObject(doc) ? shallowCopy(doc) : {};
    Object.keys(patch).forEach(function (k) {
      var v = patch[k];
      if (v === null) delete out[k];
      else setKey(out, k, applyMergePatch(hasOwn.call(out, k) ? out[k] : undefined, v, depth + 1));
    });
    return out;
  }

  // ---- the client -----------------------------------------------------------------------------

  // Errors about one channel that another try would get again.
  var CHANNEL_REFUSALS = { forbidden: 1, bad_request: 1, too_many_channels: 1 };
  // Errors about the token.
  var TOKEN_REFUSALS = { missing_token: 1, invalid_token: 1, token_expired: 1, token_not_yet_valid: 1 };

  function later(fn) { setTimeout(fn, 0); }
  function stopRead(state) {
    if (state.read) clearTimeout(state.read.timer);
    state.read = null;
    state.pending = [];
  }
  function rethrowLater(e) { setTimeout(function () { throw e; }, 0); }

  function DocsyncClient(options) {
    if (!(this instanceof DocsyncClient)) return new DocsyncClient(options);
    options = options || {};
    var url = options.url;
    if (!url) {
      if (typeof location === 'undefined' || !location.origin) {
        throw new Error('DocsyncClient: no url given and no page origin to default to');
      }
      url = location.origin;
    }
    this.url = String(url).replace(/\/+$/, '');
    this.transport = options.transport || 'ws';
    if (this.transport !== 'ws' && this.transport !== 'sse') {
      throw new Error("DocsyncClient: transport must be 'ws' or 'sse', not " + JSON.stringify(this.transport));
    }
    this._WebSocket = options.WebSocket || (typeof WebSocket !== 'undefined' ? WebSocket : null);
    this._EventSource = options.EventSource || (typeof EventSource !== 'undefined' ? EventSource : null);
    this._fetch = options.fetch || (typeof fetch !== 'undefined' ? fetch.bind(globalThis) : null);
    if (this.transport === 'ws' && !this._WebSocket) throw new Error('DocsyncClient: no WebSocket (pass options.WebSocket)');
    if (this.transport === 'sse' && !this._EventSource) throw new Error('DocsyncClient: no EventSource (pass options.EventSource)');
    this._getToken = typeof options.getToken === 'function' ? options.getToken : null;
    this._token = options.token || null;
    this._reconnectDelay = options.reconnectDelay == null ? 250 : options.reconnectDelay;
    this._maxReconnectDelay = options.maxReconnectDelay == null ? 10000 : options.maxReconnectDelay;
    this._stableAfter = options.stableAfter == null ? 5000 : options.stableAfter;
    this._refreshMargin = options.refreshMargin == null ? 30000 : options.refreshMargin;
    this._patches = options.patches !== false;

    this.status = 'closed';
    this._listeners = { status: [], error: [] };
    this._channels = new Map();  // channel -> {handlers, last, doc, meta, refused, read, pending}
    this._conn = null;           // the current connection (or the attempt to open one)
    this._attempt = 0;           // failed attempts since the last stable connection
    this._retryTimer = null;
    this._refreshTimer = null;
    this._reopenQueued = false;
    this._stopped = false;       // a fixed token was refused: wait for setToken
    this._closed = false;

    var self = this;
    this._onOnline = function () { self._retryNow(); };
    if (typeof window !== 'undefined' && window.addEventListener) window.addEventListener('online', this._onOnline);
  }

  DocsyncClient.prototype.on = function (event, fn) {
    if (!this._listeners[event]) throw new Error("DocsyncClient: no event '" + event + "' (status, error)");
    this._listeners[event].push(fn);
    return this;
  };

  DocsyncClient.prototype.off = function (event, fn) {
    var list = this._listeners[event];
    if (list) { var i = list.indexOf(fn); if (i >= 0) list.splice(i, 1); }
    return this;
  };

  DocsyncClient.prototype._emit = function (event, value) {
    this._listeners[event].slice().forEach(function (fn) {
      try { fn(value); } catch (e) { rethrowLater(e); }
    });
  };

  DocsyncClient.prototype._setStatus = function (status) {
    if (status === 'open') this._corsReported = false;
    if (this.status === status) return;
    this.status = status;
    this._emit('status', status);
  };

  DocsyncClient.prototype._error = function (code, channel, message) {
    this._emit('error', { error: code, channel: channel || null, message: message || code });
  };

  DocsyncClient.prototype.subscribe = function (channel, handler) {
    if (this._closed) throw new Error('DocsyncClient: subscribe after close()');
    if (typeof channel !== 'string' || !channel) throw new Error('DocsyncClient: a channel is a non-empty string');
    if (typeof handler !== 'function') throw new Error('DocsyncClient: subscribe(channel, handler) needs a handler');
    var self = this;
    var state = this._channels.get(channel);
    var entry = { handler: handler };
    var fresh = !state || state.refused;
    if (!state) {
      state = { handlers: new Set(), last: null, doc: undefined, meta: null, refused: null, read: null, pending: [] };
      this._channels.set(channel, state);
    }
    state.handlers.add(entry);
    if (state.refused) state.refused = null;  // subscribing again retries a refused channel
    if (fresh) {
      this._channelAdded(channel);
    } else if (state.meta) {
      later(function () {
        if (state.handlers.has(entry) && self._channels.get(channel) === state) {
          try { handler(state.doc, state.meta); } catch (e) { rethrowLater(e); }
        }
      });
    }
    return {
      channel: channel,
      unsubscribe: function () { self._unsubscribe(channel, state, entry); },
    };
  };

  DocsyncClient.prototype._unsubscribe = function (channel, state, entry) {
    if (!state.handlers.delete(entry) || state.handlers.size) return;
    if (this._channels.get(channel) !== state) return;
    this._channels.delete(channel);
    stopRead(state);
    if (this._closed) return;
    if (this.transport === 'ws') {
      var c = this._conn;
      if (c && c.open && !state.refused) this._send(c, { type: 'unsubscribe', channel: channel });
    } else {
      this._queueReopen();
    }
  };

  // The channels to follow, in subscription order: those not refused.
  DocsyncClient.prototype._active = function () {
    var out = [];
    this._channels.forEach(function (s, c) { if (!s.refused) out.push(c); });
    return out;
  };

  DocsyncClient.prototype.setToken = function (token) {
    if (this._closed) return;
    this._token = token || null;
    if (this._stopped) {
      this._stopped = false;
      this._connect('connecting');
      return;
    }
    this._tokenChanged();
  };

  DocsyncClient.prototype.close = function () {
    if (this._closed) return;
    this._closed = true;
    if (this._conn) this._drop(this._conn);
    clearTimeout(this._retryTimer);
    clearTimeout(this._refreshTimer);
    this._retryTimer = this._refreshTimer = null;
    this._channels.forEach(stopRead);
    this._channels.clear();
    if (typeof window !== 'undefined' && window.removeEventListener) window.removeEventListener('online', this._onOnline);
    this._setStatus('closed');
  };

  DocsyncClient.prototype._channelAdded = function (channel) {
    if (this._stopped) return;
    if (this.transport === 'sse') { this._queueReopen(); return; }
    var c = this._conn;
    if (c && c.open) this._subscribeWs(c, channel);
    else if (!c && !this._retryTimer) this._connect('connecting');
    // else: the connection being opened subscribes every channel once it is up
  };

  // ---- connecting -------------------------------------------------------------------------------

  // Opens a connection: a token first (getToken, unless `fresh`: this._token was just fetched),
  // then the transport.
  DocsyncClient.prototype._connect = function (status, fresh) {
    if (this._closed || this._stopped || this._conn) return;
    clearTimeout(this._retryTimer);
    this._retryTimer = null;
    if (this.transport === 'sse' && !this._active().length) { this._setStatus('closed'); return; }
    this._setStatus(status);
    var self = this;
    var conn = { open: false, openedAt: 0, token: null };
    this._conn = conn;
    var tokenReady = this._getToken && !fresh
      ? Promise.resolve().then(function () { return self._getToken(); })
      : Promise.resolve(this._token);
    tokenReady.then(function (token) {
      if (self._conn !== conn) return;
      if (self._getToken && !fresh) { self._token = token || null; self._scheduleRefresh(false); }
      conn.token = self._token;
      if (self.transport === 'ws') self._openWs(conn); else self._openSse(conn);
    }, function (e) {
      if (self._conn !== conn) return;
      self._conn = null;
      self._error('token_unavailable', null, 'getToken failed: ' + (e && e.message || e));
      self._retry();
    });
  };

  // Forgets `conn` and closes what it holds; resets the backoff when it had been up long enough.
  DocsyncClient.prototype._drop = function (conn) {
    if (this._conn === conn) this._conn = null;
    if (conn.open && Date.now() - conn.openedAt >= this._stableAfter) this._attempt = 0;
    conn.open = false;
    var s = conn.socket, es = conn.source;
    conn.socket = conn.source = null;
    if (s) { s.onopen = s.onmessage = s.onclose = s.onerror = null; try { s.close(); } catch (e) { /* closing */ } }
    if (es) { try { es.close(); } catch (e) { /* closing */ } }
  };

  // Reconnects after the backoff delay.
  DocsyncClient.prototype._retry = function () {
    if (this._closed || this._stopped || this._retryTimer) return;
    if (this.transport === 'sse' && !this._active().length) { this._setStatus('closed'); return; }
    this._setStatus('reconnecting');
    var self = this;
    var delay = backoffDelay(this._attempt++, this._reconnectDelay, this._maxReconnectDelay);
    this._retryTimer = setTimeout(function () {
      self._retryTimer = null;
      self._connect('reconnecting');
    }, delay);
  };

  DocsyncClient.prototype._retryNow = function () {
    if (!this._retryTimer) return;
    clearTimeout(this._retryTimer);
    this._retryTimer = null;
    this._connect('reconnecting');
  };

  // The connection is gone (closed by the server or the network): reconnect.
  DocsyncClient.prototype._lost = function (conn) {
    if (this._conn !== conn) return;
    this._drop(conn);
    this._retry();
  };

  // A fixed token was refused: nothing to retry with until setToken.
  DocsyncClient.prototype._stop = function () {
    if (this._conn) this._drop(this._conn);
    clearTimeout(this._retryTimer);
    this._retryTimer = null;
    this._stopped = true;
    this._setStatus('closed');
  };

  // ---- tokens -----------------------------------------------------------------------------------

  DocsyncClient.prototype._scheduleRefresh = function (sameToken) {
    clearTimeout(this._refreshTimer);
    this._refreshTimer = null;
    if (!this._getToken || this._closed) return;
    var exp = tokenExpiry(this._token);
    if (exp == null) return;
    var delay = refreshDelay(exp, Date.now(), this._refreshMargin);
    if (sameToken) delay = Math.max(delay, 5000);  // getToken gave the same token back: ask less often
    var self = this;
    this._refreshTimer = setTimeout(function () { self._refresh(); }, delay);
  };

  DocsyncClient.prototype._refresh = function () {
    var self = this;
    var old = this._token;
    Promise.resolve().then(function () { return self._getToken(); }).then(function (token) {
      if (self._closed) return;
      self._token = token || null;
      var same = self._token === old;
      self._scheduleRefresh(same);
      if (!same) self._tokenChanged();
    }, function (e) {
      if (self._closed) return;
      self._error('token_unavailable', null, 'getToken failed: ' + (e && e.message || e));
      clearTimeout(self._refreshTimer);
      self._refreshTimer = setTimeout(function () { self._refresh(); }, 5000);
    });
  };

  // Hands a new token to the connection: an `auth` message over WS, a new stream over SSE.
  DocsyncClient.prototype._tokenChanged = function () {
    var c = this._conn;
    if (!c) return;
    if (this.transport === 'ws') {
      if (c.open && this._token) { c.token = this._token; this._send(c, { type: 'auth', token: this._token }); }
      // still opening: sent once it is up (see _openWs)
    } else {
      this._drop(c);
      this._connect('connecting', true);
    }
  };

  // ---- delivering -------------------------------------------------------------------------------

  // The state of a message's channel, when it is followed.
  DocsyncClient.prototype._stateOf = function (message) {
    var channel = message && message.channel;
    var state = typeof channel === 'string' ? this._channels.get(channel) : null;
    return state && !state.refused ? state : null;
  };

  // A whole doc (a message or the answer of a read).
  DocsyncClient.prototype._deliver = function (message) {
    var state = this._stateOf(message);
    if (!state) return;
    var v = versionOf(message);
    if (!v) { this._error('bad_message', message.channel, 'a doc without a valid version'); return; }
    if (this._hand(state, message.channel, v, message.doc === undefined ? null : message.doc, false) && state.pending.length) {
      this._drainPending(state, message.channel);
    }
  };

  // Hands `doc` at version v to the channel's handlers, unless it is not newer than the last one.
  DocsyncClient.prototype._hand = function (state, channel, v, doc, patched) {
    if (state.last) {
      var order = compareVersions(v, state.last);
      if (order < 0) return false;  // older: a newer one was delivered
      // The version held: already delivered, unless it is a whole doc with another value (two
      // computes of one version; the later is what the gateway holds), which replaces it.
      if (order === 0 && (patched || !state.meta || sameJson(doc, state.doc))) return false;
    }
    state.last = v;
    var meta = {
      channel: channel,
      version: formatVersion(v),
      generation: v.generation,
      lsn: hex(v.hi) + '/' + hex(v.lo),
      deleted: doc === null,
    };
    if (patched) meta.patched = true;
    state.doc = doc;
    state.meta = meta;
    state.handlers.forEach(function (entry) {
      if (!state.handlers.has(entry)) return;
      try { entry.handler(doc, meta); } catch (e) { rethrowLater(e); }
    });
    return true;
  };

  // A patch message: applied when the channel's doc is held at its base version, dropped when a
  // version at or past its own was delivered, else the whole doc is read (_read). While a read is
  // under way, a patch that does not fit waits for its answer.
  DocsyncClient.prototype._patch = function (message) {
    var state = this._stateOf(message);
    if (!state) return;
    var channel = message.channel;
    var p = {
      version: versionOf(message),
      base: baseVersionOf(message),
      json: Array.isArray(message.patch),
      patch: Array.isArray(message.patch) ? message.patch : message.merge,
    };
    if (!p.version || !p.base || compareVersions(p.version, p.base) <= 0 ||
        (p.json ? message.merge !== undefined : message.patch !== undefined || p.patch === undefined)) {
      this._error('bad_message', channel, 'a patch without a valid version, a valid older base version and one of patch or merge');
      if (!p.version || newerThan(p.version, state.last)) this._read(channel, state);
      return;
    }
    if (this._applyPatch(state, channel, p) !== 'miss') return;
    if (state.read) {
      if (state.pending.length >= MAX_PENDING) state.pending.shift();  // the read, or the next one, covers it
      state.pending.push(p);
    } else {
      this._read(channel, state);
    }
  };

  var MAX_PENDING = 64;  // patches kept per channel while its doc is read

  // 'applied', 'old' (a version at or past it was delivered) or 'miss' (the doc held is not at its
  // base, or it does not apply).
  DocsyncClient.prototype._applyPatch = function (state, channel, p) {
    if (state.last && compareVersions(p.version, state.last) <= 0) return 'old';
    if (!state.meta || compareVersions(p.base, state.last) !== 0) return 'miss';
    var doc;
    try {
      doc = p.json ? applyJsonPatch(state.doc, p.patch) : applyMergePatch(state.doc, p.patch);
    } catch (e) {
      this._error('bad_patch', channel, 'the patch from ' + formatVersion(p.base) + ' to ' + formatVersion(p.version) +
                  ' does not apply (' + (e && e.message || e) + '); reading the whole doc');
      return 'miss';
    }
    this._hand(state, channel, p.version, doc, true);
    return 'applied';
  };

  // Applies the waiting patches that now fit and drops the older ones; keeps the others. Whether
  // one newer than the doc held is left.
  DocsyncClient.prototype._drainPending = function (state, channel) {
    var pending = state.pending;
    state.pending = [];
    for (var i = 0; i < pending.length; i++) {
      if (this._applyPatch(state, channel, pending[i]) === 'miss') state.pending.push(pending[i]);
    }
    return state.pending.length > 0;
  };

  // Reads the channel's whole doc with GET /v1/docs/{channel}: one read at a time per channel; a
  // failed one is reported and tried again after the reconnect backoff. Its answer is delivered when
  // it is newer, then the patches that came meanwhile are applied on top if they fit; if one newer
  // still does not fit, the doc is read once more.
  DocsyncClient.prototype._read = function (channel, state) {
    if (state.read || this._closed) return;
    if (!this._fetch) {
      this._error('unavailable', channel, 'a patch did not fit the doc held and there is no fetch to read the whole doc ' +
                  '(pass options.fetch, or patches: false)');
      state.pending = [];
      return;
    }
    state.read = { attempt: 0, timer: null };
    this._readOnce(channel, state, state.read);
  };

  DocsyncClient.prototype._readOnce = function (channel, state, read) {
    var self = this;
    var live = function () {
      return !self._closed && self._channels.get(channel) === state && !state.refused && state.read === read;
    };
    var url = this.url + '/v1/docs/' + encodeURIComponent(channel);
    var headers = { Accept: 'application/json' };
    if (this._token) headers.Authorization = 'Bearer ' + this._token;
    var done = function (envelope) {
      state.read = null;
      if (envelope) self._hand(state, channel, versionOf(envelope), envelope.doc === undefined ? null : envelope.doc, false);
      if (self._drainPending(state, channel)) { state.pending = []; self._read(channel, state); }
    };
    var failed = function (code, message, retry) {
      self._error(code, channel, message);
      if (!retry) { state.read = null; state.pending = []; return; }
      read.timer = setTimeout(function () {
        read.timer = null;
        if (live()) self._readOnce(channel, state, read);
      }, backoffDelay(read.attempt++, self._reconnectDelay, self._maxReconnectDelay));
    };
    Promise.resolve().then(function () { return self._fetch(url, { headers: headers }); }).then(function (res) {
      return res.json().then(function (body) { return { res: res, body: body }; },
                             function () { return { res: res, body: null }; });
    }).then(function (r) {
      if (!live()) return;
      var status = r.res.status, body = r.body && typeof r.body === 'object' ? r.body : null;
      if (status === 404) { done(null); return; }  // no doc yet: the stream brings it
      if (!r.res.ok) {
        var code = body && typeof body.error === 'string' ? body.error : 'http_' + status;
        var retry = status >= 500 || status === 429 || (status === 401 && !!self._getToken);
        failed(code, 'GET /v1/docs/' + channel + ': ' + (body && typeof body.message === 'string' ? body.message : 'HTTP ' + status), retry);
        return;
      }
      if (!body || body.channel !== channel || !versionOf(body)) {
        failed('bad_message', 'GET /v1/docs/' + channel + ' answered no doc of the channel with a valid version', false);
        return;
      }
      done(body);
    }, function (e) {
      if (live()) failed('unavailable', 'GET /v1/docs/' + channel + ' failed: ' + (e && e.message || e), true);
    });
  };

  DocsyncClient.prototype._lastVersion = function (channel) {
    var s = this._channels.get(channel);
    return s && s.last ? formatVersion(s.last) : null;
  };

  // An error from the gateway (a WS message, an SSE `event: stream-error`, or the JSON of a refused SSE
  // request); conn is the connection it came on.
  DocsyncClient.prototype._serverError = function (conn, body) {
    var code = typeof body.error === 'string' ? body.error : 'error';
    var channel = typeof body.channel === 'string' ? body.channel : null;
    if (code === 'cors') {
      // Reported once until a connection opens; retried, since the gateway may be restarted with
      // the flag.
      if (!this._corsReported) this._error(code, null, body.message);
      this._corsReported = true;
      this._drop(conn);
      this._retry();
      return;
    }
    this._error(code, channel, typeof body.message === 'string' ? body.message : code);
    var ws = this.transport === 'ws';
    var state = channel ? this._channels.get(channel) : null;
    if (channel && CHANNEL_REFUSALS[code]) {
      if (state) state.refused = { error: code, message: body.message };
      if (ws) return;  // the connection carries on with the other channels
      this._drop(conn);
      this._retry();
      return;
    }
    if (!ws && CHANNEL_REFUSALS[code]) {
      // The stream's request itself (too many channels, a bad one): the same set would be refused
      // again. Wait for the set to change.
      this._drop(conn);
      this._setStatus('closed');
      return;
    }
    if (TOKEN_REFUSALS[code]) {
      if (this._getToken) {
        // a fresh token at the next connect
        this._drop(conn);
        this._retry();
      } else if (channel && ws) {
        if (state) state.refused = { error: code, message: body.message };
      } else {
        this._stop();
      }
      return;
    }
    if (ws && code !== 'too_slow') return;  // reported; the connection decides whether it goes on
    this._drop(conn);
    this._retry();
  };

  // ---- WebSocket ----------------------------------------------------------------------------------

  function wsUrl(base, token, patches) {
    var q = [];
    if (token) q.push('token=' + encodeURIComponent(token));
    if (patches) q.push('patches=1');
    var u = base.replace(/^http(s?):/i, function (m, s) { return 'ws' + s + ':'; }) + '/v1/ws';
    return q.length ? u + '?' + q.join('&') : u;
  }

  DocsyncClient.prototype._openWs = function (conn) {
    var self = this;
    var socket;
    try {
      socket = new this._WebSocket(wsUrl(this.url, conn.token, this._patches));
    } catch (e) {
      this._conn = null;
      this._error('bad_request', null, 'cannot open a WebSocket: ' + (e && e.message || e));
      this._retry();
      return;
    }
    conn.socket = socket;
    socket.onopen = function () {
      if (self._conn !== conn) return;
      conn.open = true;
      conn.openedAt = Date.now();
      self._setStatus('open');
      if (self._token && self._token !== conn.token) {  // refreshed while the socket was opening
        conn.token = self._token;
        self._send(conn, { type: 'auth', token: self._token });
      }
      self._active().forEach(function (channel) { self._subscribeWs(conn, channel); });
    };
    socket.onmessage = function (ev) {
      if (self._conn !== conn) return;
      var msg;
      try { msg = JSON.parse(typeof ev.data === 'string' ? ev.data : String(ev.data)); } catch (e) {
        self._error('bad_message', null, 'a message that is not JSON');
        return;
      }
      if (!msg || typeof msg !== 'object') return;
      if (msg.type === 'doc') self._deliver(msg);
      else if (msg.type === 'patch') self._patch(msg);
      else if (msg.type === 'error') self._serverError(conn, msg);
      // 'subscribed' needs nothing
    };
    socket.onerror = function () { /* a close follows */ };
    socket.onclose = function () {
      if (self._conn !== conn) return;
      if (conn.open || !conn.token) { self._lost(conn); return; }
      // Never opened. A browser shows a refused upgrade (401) as a bare close; the SSE endpoint
      // checks a token the same way and answers in JSON, so ask it whether the token is the reason.
      var channels = self._active();
      var probe = self._fetch && channels.length
        ? self._probe(sseUrl(self.url, channels.slice(0, 1), conn.token, null)) : Promise.resolve(null);
      probe.then(function (body) {
        if (self._conn !== conn) return;
        if (body && TOKEN_REFUSALS[body.error]) {  // the token, whatever the channel
          self._serverError(conn, { error: body.error, message: body.message });
          return;
        }
        var exp = body ? null : tokenExpiry(conn.token);
        if (!body && !self._getToken && exp != null && exp * 1000 <= Date.now()) {
          self._serverError(conn, { error: 'token_expired', message: 'the token expired at ' + new Date(exp * 1000).toISOString() });
          return;
        }
        self._lost(conn);
      });
    };
  };

  DocsyncClient.prototype._subscribeWs = function (conn, channel) {
    var m = { type: 'subscribe', channel: channel };
    var after = this._lastVersion(channel);
    if (after) m.after = after;
    this._send(conn, m);
  };

  DocsyncClient.prototype._send = function (conn, message) {
    try { conn.socket.send(JSON.stringify(message)); } catch (e) { /* closing: onclose reconnects */ }
  };

  // ---- Server-sent events -------------------------------------------------------------------------

  function sseUrl(base, channels, token, cursor, patches) {
    var q = channels.map(function (c) { return 'channel=' + encodeURIComponent(c); });
    if (token) q.push('token=' + encodeURIComponent(token));
    if (cursor) q.push('last-event-id=' + encodeURIComponent(cursor));
    if (patches) q.push('patches=1');
    return base + '/v1/sse?' + q.join('&');
  }

  // Reopens the stream for the current channel set, once per turn of the event loop.
  DocsyncClient.prototype._queueReopen = function () {
    if (this._reopenQueued) return;
    this._reopenQueued = true;
    var self = this;
    Promise.resolve().then(function () {
      self._reopenQueued = false;
      if (self._closed || self._stopped) return;
      var channels = self._active();
      var c = self._conn;
      if (c && c.channels && c.source && channels.join('\n') === c.channels.join('\n')) return;
      if (self._retryTimer) {  // the retry takes the new set
        if (!channels.length) { clearTimeout(self._retryTimer); self._retryTimer = null; self._setStatus('closed'); }
        return;
      }
      if (c) self._drop(c);
      if (!channels.length) { self._setStatus('closed'); return; }
      self._connect('connecting');
    });
  };

  DocsyncClient.prototype._openSse = function (conn) {
    var self = this;
    var channels = this._active();
    if (!channels.length) { this._conn = null; this._setStatus('closed'); return; }
    var versions = new Map();
    channels.forEach(function (c) { versions.set(c, self._lastVersion(c)); });
    var url = sseUrl(this.url, channels, conn.token, buildCursor(channels, versions), this._patches);
    var source;
    try {
      source = new this._EventSource(url);
    } catch (e) {
      this._conn = null;
      this._error('bad_request', null, 'cannot open an EventSource: ' + (e && e.message || e));
      this._retry();
      return;
    }
    conn.source = source;
    conn.channels = channels;
    source.addEventListener('open', function () {
      if (self._conn !== conn) return;
      conn.open = true;
      conn.openedAt = Date.now();
      self._setStatus('open');
    });
    source.addEventListener('doc', function (ev) {
      if (self._conn !== conn) return;
      var env;
      try { env = JSON.parse(ev.data); } catch (e) { self._error('bad_message', null, 'an event that is not JSON'); return; }
      if (env && conn.channels.indexOf(env.channel) >= 0) self._deliver(env);
    });
    source.addEventListener('patch', function (ev) {
      if (self._conn !== conn) return;
      var env;
      try { env = JSON.parse(ev.data); } catch (e) { self._error('bad_message', null, 'an event that is not JSON'); return; }
      if (env && conn.channels.indexOf(env.channel) >= 0) self._patch(env);
    });
    source.addEventListener('notice', function (ev) {  // about one channel (deferred): the stream goes on
      if (self._conn !== conn) return;
      var body;
      try { body = JSON.parse(ev.data); } catch (e) { return; }
      if (body && typeof body.error === 'string')
        self._error(body.error, typeof body.channel === 'string' ? body.channel : null,
                    typeof body.message === 'string' ? body.message : body.error);
    });
    source.addEventListener('stream-error', function (ev) {  // the gateway's reason, then it closes the stream
      if (self._conn !== conn) return;
      var body;
      try { body = JSON.parse(ev.data); } catch (e) { body = { error: 'error', message: ev.data }; }
      self._serverError(conn, body && typeof body === 'object' ? body : { error: 'error' });
    });
    source.addEventListener('error', function () {
      if (self._conn !== conn) return;
      // The stream failed or was lost. The EventSource would reconnect by itself with the same
      // URL (and token): close it and reconnect here instead.
      var wasOpen = conn.open;
      try { source.close(); } catch (e) { /* closing */ }
      if (wasOpen || !self._fetch) { self._lost(conn); return; }
      // Refused before the stream started: the same URL fetched says why (401/403/503 JSON).
      self._probe(url).then(function (body) {
        if (self._conn !== conn) return;
        if (body) self._serverError(conn, body); else self._lost(conn);
      });
    });
  };

  // The error JSON the gateway answers `url` with, or null (it answered 200, or is unreachable). A
  // page of another origin that the gateway does not allow cannot read any answer: then
  // {error: 'cors'} naming the flag that allows it.
  DocsyncClient.prototype._probe = function (url) {
    var self = this;
    var ctl = typeof AbortController !== 'undefined' ? new AbortController() : null;
    return this._fetch(url, { headers: { Accept: 'text/event-stream' }, signal: ctl ? ctl.signal : undefined })
      .then(function (res) {
        if (res.ok) { if (ctl) ctl.abort(); return null; }
        return res.json().then(function (b) {
          return b && typeof b === 'object' && typeof b.error === 'string' ? b : { error: 'http_' + res.status };
        }, function () { return { error: 'http_' + res.status, message: 'HTTP ' + res.status }; });
      })
      .catch(function () { return self._corsRefusal(); });
  };

  // Why a fetch failed outright, when the page is of another origin than the gateway: if the gateway
  // answers a request whose answer the page may not read (mode no-cors), it is up, and the browser
  // withheld its answers from this origin (CORS). Null otherwise (the gateway is unreachable).
  DocsyncClient.prototype._corsRefusal = function () {
    var page = typeof location !== 'undefined' && location && location.origin;
    var gateway;
    try { gateway = new URL(this.url).origin; } catch (e) { return Promise.resolve(null); }
    if (!page || page === 'null' || page === gateway) return Promise.resolve(null);
    return this._fetch(this.url + '/healthz', { mode: 'no-cors' }).then(function () {
      return {
        error: 'cors',
        message: 'the gateway at ' + gateway + ' does not allow pages of ' + page + ' (CORS): start docsync-gateway ' +
          'with --allow-origin ' + page
      };
    }, function () { return null; });
  };

  DocsyncClient.parseVersion = parseVersion;
  DocsyncClient.formatVersion = formatVersion;
  DocsyncClient.versionOf = versionOf;
  DocsyncClient.baseVersionOf = baseVersionOf;
  DocsyncClient.applyJsonPatch = applyJsonPatch;
  DocsyncClient.applyMergePatch = applyMergePatch;
  DocsyncClient.jsonEqual = jsonEqual;
  DocsyncClient.parsePointer = parsePointer;
  DocsyncClient.compareVersions = compareVersions;
  DocsyncClient.newerThan = newerThan;
  DocsyncClient.buildCursor = buildCursor;
  DocsyncClient.parseCursor = parseCursor;
  DocsyncClient.backoffDelay = backoffDelay;
  DocsyncClient.decodeTokenPayload = decodeTokenPayload;
  DocsyncClient.tokenExpiry = tokenExpiry;
  DocsyncClient.refreshDelay = refreshDelay;
  return DocsyncClient;
});

// Unit tests of docsync-client.js's patches (docs/patches.md): applyJsonPatch (RFC 6902, every op
// and every error) and applyMergePatch (RFC 7386) as pure functions that never change their input,
// and the client's version rules over fake transports: a patch is applied only on its base, any
// mismatch reads the whole doc with GET /v1/docs/{channel}, older messages are dropped, and
// messages that come during the read are applied on top. Run: node --test tests/browser/
'use strict';
const { test, describe } = require('node:test');
const assert = require('node:assert');
const DocsyncClient = require('../../worker/gateway/assets/docsync-client.js');
const { tick, until, FakeWebSocket, FakeEventSource, client, recorder } = require('./fakes.js');
const {C, V, lsn, docEnv, patchEnv, wsDoc, wsPatch, fakeFetch, wsClient} = require('./patch_fakes.js');

const { applyJsonPatch, applyMergePatch, jsonEqual, parsePointer, baseVersionOf, formatVersion } = DocsyncClient;

function deepFreeze(v) {
  if (v && typeof v === 'object') { Object.values(v).forEach(deepFreeze); Object.freeze(v); }
  return v;
}
// Applies with the input frozen (a change in place throws) and checks it is still the same text.
function jp(doc, patch) {
  const before = JSON.stringify([doc, patch]);
  const out = applyJsonPatch(deepFreeze(doc), deepFreeze(patch));
  assert.strictEqual(JSON.stringify([doc, patch]), before, 'the input changed');
  return out;
}
function mp(doc, patch) {
  const before = JSON.stringify([doc, patch]);
  const out = applyMergePatch(deepFreeze(doc), deepFreeze(patch));
  assert.strictEqual(JSON.stringify([doc, patch]), before, 'the input changed');
  return out;
}
const refused = (doc, patch, re) => assert.throws(() => jp(doc, patch), (e) => e.name === 'PatchError' && re.test(e.message), String(re));

describe('applyJsonPatch: each operation', () => {
  test('add: object member, array insert, array end, whole doc, replacing a member', () => {
    assert.deepStrictEqual(jp({ foo: 'bar' }, [{ op: 'add', path: '/baz', value: 'qux' }]), { foo: 'bar', baz: 'qux' });
    assert.deepStrictEqual(jp({ foo: ['bar', 'baz'] }, [{ op: 'add', path: '/foo/1', value: 'qux' }]), { foo: ['bar', 'qux', 'baz'] });
    assert.deepStrictEqual(jp({ foo: ['bar'] }, [{ op: 'add', path: '/foo/1', value: 'end' }]), { foo: ['bar', 'end'] });
    assert.deepStrictEqual(jp({ foo: ['bar'] }, [{ op: 'add', path: '/foo/-', value: ['abc', 'def'] }]), { foo: ['bar', ['abc', 'def']] });
    assert.deepStrictEqual(jp({ foo: 1 }, [{ op: 'add', path: '', value: [1, 2] }]), [1, 2]);
    assert.deepStrictEqual(jp({ foo: 1 }, [{ op: 'add', path: '/foo', value: { x: null } }]), { foo: { x: null } });
    assert.deepStrictEqual(jp({ foo: 'bar' }, [{ op: 'add', path: '/child', value: { grandchild: {} } }]),
      { foo: 'bar', child: { grandchild: {} } });
    assert.deepStrictEqual(jp({}, [{ op: 'add', path: '/', value: 1 }]), { '': 1 });  // the key ""
    assert.deepStrictEqual(jp({ '0': 'a' }, [{ op: 'add', path: '/1', value: 'b' }]), { '0': 'a', '1': 'b' });  // digits name a member of an object
  });

  test('remove: object member, array element', () => {
    assert.deepStrictEqual(jp({ baz: 'qux', foo: 'bar' }, [{ op: 'remove', path: '/baz' }]), { foo: 'bar' });
    assert.deepStrictEqual(jp({ foo: ['bar', 'qux', 'baz'] }, [{ op: 'remove', path: '/foo/1' }]), { foo: ['bar', 'baz'] });
    assert.deepStrictEqual(jp([1, [2, 3]], [{ op: 'remove', path: '/1/0' }]), [1, [3]]);
  });

  test('replace: member, element, whole doc', () => {
    assert.deepStrictEqual(jp({ baz: 'qux', foo: 'bar' }, [{ op: 'replace', path: '/baz', value: 'boo' }]), { baz: 'boo', foo: 'bar' });
    assert.deepStrictEqual(jp([1, 2, 3], [{ op: 'replace', path: '/2', value: { a: 1 } }]), [1, 2, { a: 1 }]);
    assert.deepStrictEqual(jp({ a: 1 }, [{ op: 'replace', path: '', value: 'x' }]), 'x');
    assert.deepStrictEqual(jp(null, [{ op: 'replace', path: '', value: { a: 1 } }]), { a: 1 });
  });

  test('move: between members, within an array, to the array end', () => {
    assert.deepStrictEqual(
      jp({ foo: { bar: 'baz', waldo: 'fred' }, qux: { corge: 'grault' } }, [{ op: 'move', from: '/foo/waldo', path: '/qux/thud' }]),
      { foo: { bar: 'baz' }, qux: { corge: 'grault', thud: 'fred' } });
    assert.deepStrictEqual(jp({ foo: ['all', 'grass', 'cows', 'eat'] }, [{ op: 'move', from: '/foo/1', path: '/foo/3' }]),
      { foo: ['all', 'cows', 'eat', 'grass'] });
    assert.deepStrictEqual(jp([1, 2, 3], [{ op: 'move', from: '/0', path: '/-' }]), [2, 3, 1]);
    assert.deepStrictEqual(jp({ a: { b: 1 } }, [{ op: 'move', from: '/a', path: '/a' }]), { a: { b: 1 } });
    assert.deepStrictEqual(jp({ a: { b: [1] } }, [{ op: 'move', from: '/a/b', path: '' }]), [1]);
  });

  test('copy: the value, not the same object twice', () => {
    assert.deepStrictEqual(jp({ a: { x: 1 } }, [{ op: 'copy', from: '/a', path: '/b' }]), { a: { x: 1 }, b: { x: 1 } });
    assert.deepStrictEqual(jp([1, 2], [{ op: 'copy', from: '/1', path: '/0' }]), [2, 1, 2]);
    // after a copy, changing one must not change the other
    const out = jp({ a: { x: 1 } }, [{ op: 'replace', path: '/a/x', value: 2 }, { op: 'copy', from: '/a', path: '/b' },
                                    { op: 'replace', path: '/b/x', value: 3 }]);
    assert.deepStrictEqual(out, { a: { x: 2 }, b: { x: 3 } });
  });

  test('test: deep equality, numbers by value, objects in any key order', () => {
    const doc = { baz: 'qux', foo: ['a', 2, 'c'], o: { a: 1, b: [true, null] }, n: 1 };
    assert.deepStrictEqual(jp(doc, [{ op: 'test', path: '/baz', value: 'qux' }, { op: 'test', path: '/foo/1', value: 2 }]), doc);
    jp(doc, [{ op: 'test', path: '/o', value: { b: [true, null], a: 1 } }]);
    jp(doc, [{ op: 'test', path: '/n', value: 1.0 }]);
    jp(doc, [{ op: 'test', path: '', value: JSON.parse(JSON.stringify(doc)) }]);
    refused(doc, [{ op: 'test', path: '/baz', value: 'bar' }], /operation 0 \(test\): the value at "\/baz" is not "bar"/);
    refused(doc, [{ op: 'test', path: '/n', value: '1' }], /is not "1"/);
    refused(doc, [{ op: 'test', path: '/o', value: { a: 1 } }], /is not/);
    refused(doc, [{ op: 'test', path: '/foo', value: ['a', 2] }], /is not/);
    refused(doc, [{ op: 'test', path: '/o', value: [1] }], /is not/);
    refused({ a: null }, [{ op: 'test', path: '/a', value: {} }], /is not/);
    assert.ok(jsonEqual({ a: [1, { b: 'x' }] }, { a: [1, { b: 'x' }] }));
    assert.ok(!jsonEqual({ a: 1 }, { a: 1, b: undefined }));
  });

  test('JSON Pointer: ~0 and ~1, empty keys, unicode', () => {
    assert.deepStrictEqual(parsePointer(''), []);
    assert.deepStrictEqual(parsePointer('/'), ['']);
    assert.deepStrictEqual(parsePointer('/a~1b/m~0n/~01'), ['a/b', 'm~n', '~1']);
    const doc = { 'a/b': 1, 'm~n': 2, '~1': 3, 'é✓😀': 4, ' ': 5 };
    assert.deepStrictEqual(jp(doc, [{ op: 'replace', path: '/a~1b', value: 10 }, { op: 'replace', path: '/m~0n', value: 20 },
                                    { op: 'remove', path: '/~01' }, { op: 'replace', path: '/é✓😀', value: 'ü' },
                                    { op: 'test', path: '/ ', value: 5 }]),
      { 'a/b': 10, 'm~n': 20, 'é✓😀': 'ü', ' ': 5 });
  });

  test('the key __proto__ is a member like any other', () => {
    const doc = JSON.parse('{"__proto__":{"x":1},"a":1}');
    const out = jp(doc, [{ op: 'replace', path: '/__proto__/x', value: 2 }]);
    assert.strictEqual(JSON.stringify(out), '{"__proto__":{"x":2},"a":1}');
    assert.strictEqual(Object.getPrototypeOf(out), Object.prototype);
    const added = jp({}, JSON.parse('[{"op":"add","path":"/__proto__","value":{"polluted":true}}]'));
    assert.strictEqual(JSON.stringify(added), '{"__proto__":{"polluted":true}}');
    assert.strictEqual(added.polluted, undefined);
    assert.strictEqual({}.polluted, undefined);
    const merged = mp({}, JSON.parse('{"__proto__":{"polluted":true}}'));
    assert.strictEqual(JSON.stringify(merged), '{"__proto__":{"polluted":true}}');
    assert.strictEqual(merged.polluted, undefined);
  });
});

describe('applyJsonPatch: each error throws, naming the operation', () => {
  const doc = { a: { b: [1, 2, 3] }, s: 'x' };
  const cases = [
    ['not an array', { op: 'add', path: '/a', value: 1 }, /a JSON Patch is an array of operations/],
    ['an operation that is not an object', [1], /operation 0 \(\?\): an operation is an object/],
    ['no op', [{ path: '/a' }], /no "op" member/],
    ['an unknown op', [{ op: 'delete', path: '/a' }], /unknown op "delete"/],
    ['no path', [{ op: 'remove' }], /operation 0 \(remove\): no "path" member/],
    ['a path that is not a string', [{ op: 'remove', path: 1 }], /a JSON Pointer is a string/],
    ['a path without a leading /', [{ op: 'remove', path: 'a' }], /does not start with "\/"/],
    ['a bad ~ escape', [{ op: 'remove', path: '/a~2' }], /"~" not followed by 0 or 1/],
    ['a ~ at the end', [{ op: 'remove', path: '/a~' }], /"~" not followed by 0 or 1/],
    ['add without value', [{ op: 'add', path: '/c' }], /no "value" member/],
    ['replace without value', [{ op: 'replace', path: '/s' }], /no "value" member/],
    ['test without value', [{ op: 'test', path: '/s' }], /no "value" member/],
    ['move without from', [{ op: 'move', path: '/c' }], /no "from" member/],
    ['copy without from', [{ op: 'copy', path: '/c' }], /no "from" member/],
    ['add under a missing parent', [{ op: 'add', path: '/x/y', value: 1 }], /path "\/x\/y" does not exist/],
    ['add under a string', [{ op: 'add', path: '/s/y', value: 1 }], /path "\/s\/y" does not exist/],
    ['add past the array end', [{ op: 'add', path: '/a/b/4', value: 1 }], /index 4 is past the end of an array of 3/],
    ['an index with a leading zero', [{ op: 'add', path: '/a/b/01', value: 1 }], /"01" is not an array index/],
    ['an index that is not a number', [{ op: 'replace', path: '/a/b/x', value: 1 }], /"x" is not an array index/],
    ['a negative index', [{ op: 'remove', path: '/a/b/-1' }], /"-1" is not an array index/],
    ['remove a missing member', [{ op: 'remove', path: '/nope' }], /operation 0 \(remove\): path "\/nope" does not exist/],
    ['remove past the array end', [{ op: 'remove', path: '/a/b/3' }], /index 3 is past the end/],
    ['remove the array end', [{ op: 'remove', path: '/a/b/-' }], /- names the end of an array only for add/],
    ['remove the whole doc', [{ op: 'remove', path: '' }], /the whole doc cannot be removed/],
    ['replace a missing member', [{ op: 'replace', path: '/nope', value: 1 }], /does not exist/],
    ['replace past the end', [{ op: 'replace', path: '/a/b/3', value: 1 }], /past the end/],
    ['move from a missing path', [{ op: 'move', from: '/nope', path: '/c' }], /path "\/nope" does not exist/],
    ['move into its own child', [{ op: 'move', from: '/a', path: '/a/b/0' }], /"from" "\/a" is a parent of "path"/],
    ['copy from a missing path', [{ op: 'copy', from: '/a/b/9', path: '/c' }], /past the end/],
    ['test a missing path', [{ op: 'test', path: '/nope', value: 1 }], /does not exist/],
    ['the second operation fails', [{ op: 'add', path: '/c', value: 1 }, { op: 'remove', path: '/d' }], /operation 1 \(remove\)/],
  ];
  for (const [name, patch, re] of cases) {
    test(name, () => {
      refused(JSON.parse(JSON.stringify(doc)), patch, re);
    });
  }
  test('values nested deeper than 1000 are refused, not a stack overflow', () => {
    const nest = () => { let v = 1; for (let i = 0; i < 1500; i++) v = [v]; return v; };
    const deep = nest();
    assert.throws(() => applyJsonPatch({}, [{ op: 'add', path: '/a', value: deep }]), (e) => e.name === 'PatchError' && /nested deeper than 1000/.test(e.message));
    assert.throws(() => applyJsonPatch({ a: deep }, [{ op: 'test', path: '/a', value: nest() }]), (e) => e.name === 'PatchError');
    assert.throws(() => applyMergePatch({}, { a: JSON.parse('{"b":'.repeat(1500) + '1' + '}'.repeat(1500)) }), (e) => e.name === 'PatchError');
  });

  test('a scalar doc has no members', () => {
    refused(5, [{ op: 'add', path: '/a', value: 1 }], /does not exist/);
    refused('s', [{ op: 'replace', path: '/0', value: 1 }], /does not exist/);
  });
});

describe('no value handed out changes', () => {
  test('untouched parts are shared, changed paths are copies', () => {
    const doc = deepFreeze({ big: { list: [1, 2, 3] }, scores: [{ p: 'ann', s: 1 }, { p: 'bob', s: 2 }] });
    const out = applyJsonPatch(doc, [{ op: 'replace', path: '/scores/1/s', value: 3 }, { op: 'add', path: '/scores/-', value: { p: 'cy', s: 0 } }]);
    assert.strictEqual(out.big, doc.big, 'an untouched member is not copied');
    assert.strictEqual(out.scores[0], doc.scores[0]);
    assert.notStrictEqual(out.scores, doc.scores);
    assert.deepStrictEqual(doc.scores, [{ p: 'ann', s: 1 }, { p: 'bob', s: 2 }]);
    assert.deepStrictEqual(out.scores, [{ p: 'ann', s: 1 }, { p: 'bob', s: 3 }, { p: 'cy', s: 0 }]);
  });

  test('values taken from the patch are copies', () => {
    const patch = [{ op: 'add', path: '/a', value: { x: [1] } }];
    const out = applyJsonPatch({}, patch);
    out.a.x.push(2);
    assert.deepStrictEqual(patch[0].value, { x: [1] });
    const merge = { a: { x: [1] } };
    const m = applyMergePatch({}, merge);
    m.a.x.push(2);
    assert.deepStrictEqual(merge, { a: { x: [1] } });
  });

  test('a patch that fails half way leaves the doc as it was', () => {
    const doc = deepFreeze({ a: [1, 2], b: { c: 1 } });
    assert.throws(() => applyJsonPatch(doc, [{ op: 'remove', path: '/a/0' }, { op: 'replace', path: '/b/c', value: 2 },
                                             { op: 'test', path: '/b/c', value: 1 }]), /operation 2 \(test\)/);
    assert.deepStrictEqual(doc, { a: [1, 2], b: { c: 1 } });
  });

  test('many operations on one array copy it once', () => {
    const doc = deepFreeze({ list: Array.from({ length: 2000 }, (_, i) => i) });
    const patch = Array.from({ length: 2000 }, (_, i) => ({ op: 'replace', path: `/list/${i}`, value: -i }));
    const t0 = process.hrtime.bigint();
    const out = applyJsonPatch(doc, patch);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    assert.strictEqual(out.list[1999], -1999);
    assert.strictEqual(doc.list[1999], 1999);
    assert.ok(ms < 500, `2000 replaces in a 2000-element array took ${ms} ms`);
  });
});

describe('applyMergePatch (RFC 7386)', () => {
  test("the RFC's examples", () => {
    const cases = [
      [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
      [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
      [{ a: 'b' }, { a: null }, {}],
      [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
      [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
      [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
      [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
      [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
      [['a', 'b'], ['c', 'd'], ['c', 'd']],
      [{ a: 'b' }, ['c'], ['c']],
      [{ a: 'foo' }, null, null],
      [{ a: 'foo' }, 'bar', 'bar'],
      [{ e: null }, { a: 1 }, { e: null, a: 1 }],
      [[1, 2], { a: 'b', c: null }, { a: 'b' }],
      [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
    ];
    for (const [doc, patch, want] of cases) {
      assert.deepStrictEqual(mp(doc, patch), want, `${JSON.stringify(doc)} + ${JSON.stringify(patch)}`);
    }
  });

  test('shares what it does not touch', () => {
    const doc = deepFreeze({ a: { x: 1 }, b: { y: 2 } });
    const out = applyMergePatch(doc, { b: { y: 3 } });
    assert.strictEqual(out.a, doc.a);
    assert.deepStrictEqual(out, { a: { x: 1 }, b: { y: 3 } });
  });

  test('a patch that is no JSON value throws', () => {
    assert.throws(() => applyMergePatch({}, undefined), /PatchError|not undefined/);
    assert.throws(() => applyMergePatch({}, { a: () => 1 }), /not a JSON value/);
  });
});

// ---- the version rules ------------------------------------------------------------------------------

const score = (s) => [{ op: 'replace', path: '/score', value: s }];

describe('client: version rules', () => {
  test('a patch on the base is applied; earlier docs stay as they were', async () => {
    const { c, h, ws, fetch } = await wsClient();
    assert.strictEqual(ws.url, 'ws://gw.test:8080/v1/ws?token=T&patches=1');
    ws.push(wsDoc(0x10, { game: 7, score: 1, other: { big: true } }));
    ws.push(wsPatch(0x10, 0x20, score(2)));
    ws.push(wsPatch(0x20, 0x30, { score: 3, added: 'é😀' }, 'merge'));
    assert.deepStrictEqual(h.versions(), [V(0x10), V(0x20), V(0x30)]);
    assert.deepStrictEqual(h.got.map((g) => g.doc), [
      { game: 7, score: 1, other: { big: true } },
      { game: 7, score: 2, other: { big: true } },
      { game: 7, score: 3, other: { big: true }, added: 'é😀' },
    ]);
    assert.deepStrictEqual(h.got.map((g) => !!g.patched), [false, true, true]);
    assert.strictEqual(h.got[2].doc.other, h.got[0].doc.other, 'the untouched part is shared');
    assert.strictEqual(fetch.calls.length, 0);
    assert.deepStrictEqual(c.errors, []);
    c.close();
  });

  test('SSE: patches=1 in the URL, event: patch applied', async () => {
    const fetch = fakeFetch();
    const c = client({ transport: 'sse', fetch });
    const h = recorder();
    c.subscribe(C, h);
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    const es = FakeEventSource.last();
    assert.strictEqual(es.u.searchParams.get('patches'), '1');
    es.open();
    es.doc(docEnv(0x10, { score: 1 }));
    es.fire('patch', { data: JSON.stringify(patchEnv(0x10, 0x11, score(5))) });
    assert.deepStrictEqual(h.got.map((g) => [g.version, g.doc, !!g.patched]), [[V(0x10), { score: 1 }, false], [V(0x11), { score: 5 }, true]]);
    c.close();
  });

  test('patches: false asks for none', async () => {
    const c = client({ token: 'T', patches: false });
    c.subscribe(C, recorder());
    await until(() => FakeWebSocket.all.length === 1, 'a socket');
    assert.strictEqual(FakeWebSocket.last().url, 'ws://gw.test:8080/v1/ws?token=T');
    c.close();
    const s = client({ transport: 'sse', patches: false });
    s.subscribe(C, recorder());
    await until(() => FakeEventSource.all.length === 1, 'a stream');
    assert.strictEqual(FakeEventSource.last().u.searchParams.get('patches'), null);
    s.close();
  });

  test('no doc held: the whole doc is read, with the token', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsPatch(0x10, 0x20, score(2)));
    await until(() => fetch.calls.length === 1, 'a read');
    assert.strictEqual(fetch.calls[0].url, 'http://gw.test:8080/v1/docs/db%3Aboard%3A7');
    assert.strictEqual(fetch.calls[0].init.headers.Authorization, 'Bearer T');
    await fetch.answer(200, docEnv(0x20, { score: 2 }));
    assert.deepStrictEqual(h.got.map((g) => [g.version, g.doc]), [[V(0x20), { score: 2 }]]);
    ws.push(wsPatch(0x20, 0x21, score(3)));
    assert.deepStrictEqual(h.got.map((g) => g.doc.score), [2, 3]);
    assert.strictEqual(fetch.calls.length, 1);
    c.close();
  });

  test('a missed version: read, then patches go on from the doc read', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x10, { score: 1 }));
    ws.push(wsPatch(0x20, 0x30, score(3)));  // 0x20 never came
    await until(() => fetch.calls.length === 1, 'a read');
    assert.deepStrictEqual(h.versions(), [V(0x10)], 'no patch applied to the wrong base');
    await fetch.answer(200, docEnv(0x30, { score: 3 }));
    ws.push(wsPatch(0x30, 0x40, score(4)));
    assert.deepStrictEqual(h.got.map((g) => [g.version, g.doc.score, !!g.patched]),
      [[V(0x10), 1, false], [V(0x30), 3, false], [V(0x40), 4, true]]);
    assert.deepStrictEqual(c.errors, []);
    c.close();
  });

  test('older messages are dropped without a read', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x30, { score: 3 }));
    ws.push(wsPatch(0x10, 0x20, score(2)));   // older than what is held
    ws.push(wsPatch(0x20, 0x30, score(9)));   // the version held
    ws.push(wsDoc(0x20, { score: 2 }));
    await tick(5);
    assert.deepStrictEqual(h.versions(), [V(0x30)]);
    assert.strictEqual(fetch.calls.length, 0);
    c.close();
  });

  test('messages during the read: applied on top if they fit, dropped if older, one read at a time', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x10, { score: 1 }));
    ws.push(wsPatch(0x50, 0x60, score(6)));  // does not fit: read
    await until(() => fetch.calls.length === 1, 'a read');
    ws.push(wsPatch(0x60, 0x70, score(7)));  // fits the doc the read will bring
    ws.push(wsPatch(0x20, 0x30, score(3)));  // older than the read's answer
    ws.push(wsPatch(0x70, 0x80, score(8)));
    await tick(5);
    assert.strictEqual(fetch.calls.length, 1, 'one read in flight');
    await fetch.answer(200, docEnv(0x60, { score: 6 }));
    assert.deepStrictEqual(h.got.map((g) => [g.version, g.doc.score]),
      [[V(0x10), 1], [V(0x60), 6], [V(0x70), 7], [V(0x80), 8]]);
    assert.strictEqual(fetch.calls.length, 1);
    c.close();
  });

  test('a whole doc during the read is delivered; an older answer is dropped', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x10, { score: 1 }));
    ws.push(wsPatch(0x20, 0x30, score(3)));
    await until(() => fetch.calls.length === 1, 'a read');
    ws.push(wsDoc(0x40, { score: 4 }));
    ws.push(wsPatch(0x40, 0x50, score(5)));
    await fetch.answer(200, docEnv(0x30, { score: 3 }));
    assert.deepStrictEqual(h.got.map((g) => [g.version, g.doc.score]), [[V(0x10), 1], [V(0x40), 4], [V(0x50), 5]]);
    c.close();
  });

  test('a patch that still does not fit after the read reads again', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsPatch(0x10, 0x20, score(2)));
    await until(() => fetch.calls.length === 1, 'a read');
    ws.push(wsPatch(0x40, 0x50, score(5)));
    await fetch.answer(200, docEnv(0x20, { score: 2 }));  // the key was behind the stream
    await until(() => fetch.calls.length === 2, 'a second read');
    await fetch.answer(200, docEnv(0x50, { score: 5 }));
    assert.deepStrictEqual(h.got.map((g) => [g.version, g.doc.score]), [[V(0x20), 2], [V(0x50), 5]]);
    c.close();
  });

  test('a patch that does not apply: reported, the whole doc is read', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x10, { score: 1 }));
    ws.push(wsPatch(0x10, 0x20, [{ op: 'remove', path: '/nope' }]));
    assert.deepStrictEqual(c.errors.map((e) => [e.error, e.channel]), [['bad_patch', C]]);
    assert.match(c.errors[0].message, /from 1\/0\/10 to 1\/0\/20 does not apply \(operation 0 \(remove\): path "\/nope" does not exist\)/);
    await until(() => fetch.calls.length === 1, 'a read');
    await fetch.answer(200, docEnv(0x20, { score: 2, gone: true }));
    assert.deepStrictEqual(h.got.map((g) => g.doc), [{ score: 1 }, { score: 2, gone: true }]);
    c.close();
  });

  test('a patch message without valid versions: reported, the whole doc is read', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x10, { score: 1 }));
    const bad = [
      { channel: C, patch: score(2), generation: 1, lsn: lsn(0x20) },                                    // no base
      { channel: C, patch: score(2), base_generation: 1, base_lsn: lsn(0x20), generation: 1, lsn: lsn(0x20) },  // base not older
      { channel: C, patch: score(2), base_generation: 1, base_lsn: lsn(0x10), generation: 1, lsn: 'x' },     // no version
      { channel: C, base_generation: 1, base_lsn: lsn(0x10), generation: 1, lsn: lsn(0x20) },              // no patch
      { channel: C, patch: score(2), merge: {}, base_generation: 1, base_lsn: lsn(0x10), generation: 1, lsn: lsn(0x20) },  // both
      { channel: C, patch: { score: 2 }, base_generation: 1, base_lsn: lsn(0x10), generation: 1, lsn: lsn(0x20) },  // patch not an array
    ];
    for (const m of bad) ws.push({ type: 'patch', ...m });
    assert.deepStrictEqual(c.errors.map((e) => e.error), bad.map(() => 'bad_message'));
    await until(() => fetch.calls.length === 1, 'a read');
    await fetch.answer(200, docEnv(0x20, { score: 2 }));
    assert.deepStrictEqual(h.versions(), [V(0x10), V(0x20)]);
    assert.strictEqual(fetch.calls.length, 1);
    c.close();
  });

  test('a read that fails is reported and retried with the backoff', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsPatch(0x10, 0x20, score(2)));
    await fetch.fail('connection refused');
    await fetch.answer(503, { error: 'unavailable', message: 'Redis is down' });
    await fetch.answer(200, docEnv(0x20, { score: 2 }));
    assert.deepStrictEqual(c.errors.map((e) => [e.error, e.channel]), [['unavailable', C], ['unavailable', C]]);
    assert.match(c.errors[0].message, /GET \/v1\/docs\/db:board:7 failed: connection refused/);
    assert.match(c.errors[1].message, /Redis is down/);
    assert.deepStrictEqual(h.versions(), [V(0x20)]);
    assert.strictEqual(fetch.calls.length, 3);
    c.close();
  });

  test('a read refused for good is reported and not retried; the next mismatch reads again', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsPatch(0x10, 0x20, score(2)));
    await fetch.answer(403, { error: 'forbidden', channel: C, message: 'not in the token' });
    await tick(40);
    assert.strictEqual(fetch.calls.length, 1);
    assert.deepStrictEqual(c.errors.map((e) => e.error), ['forbidden']);
    ws.push(wsPatch(0x20, 0x30, score(3)));
    await fetch.answer(200, docEnv(0x30, { score: 3 }));
    assert.deepStrictEqual(h.versions(), [V(0x30)]);
    c.close();
  });

  test('an answer that is not the channel\'s doc: reported, not retried', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsPatch(0x10, 0x20, score(2)));
    await fetch.answer(200, { channel: 'db:other:1', doc: {}, generation: 1, lsn: '0/20' });
    await tick(40);
    assert.strictEqual(fetch.calls.length, 1);
    assert.deepStrictEqual(c.errors.map((e) => e.error), ['bad_message']);
    assert.deepStrictEqual(h.versions(), []);
    c.close();
  });

  test('no doc yet (404): nothing delivered, no error', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsPatch(0x10, 0x20, score(2)));
    await fetch.answer(404, { error: 'not_found' });
    ws.push(wsDoc(0x30, { score: 3 }));
    assert.deepStrictEqual(h.versions(), [V(0x30)]);
    assert.deepStrictEqual(c.errors, []);
    c.close();
  });

  test('unsubscribed or closed during the read: its answer is dropped', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsPatch(0x10, 0x20, score(2)));
    await until(() => fetch.calls.length === 1, 'a read');
    c.close();
    await fetch.answer(200, docEnv(0x20, { score: 2 }));
    assert.deepStrictEqual(h.versions(), []);
  });

  test('baseVersionOf reads the envelope or the WS base', () => {
    assert.strictEqual(formatVersion(baseVersionOf(patchEnv(0x10, 0x20, []))), V(0x10));
    assert.strictEqual(formatVersion(baseVersionOf({ base: '2/A/B' })), '2/A/B');
    assert.strictEqual(baseVersionOf({ base_generation: 1 }), null);
  });
});

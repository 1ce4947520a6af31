// docsync-client.js where a patch or a doc could mislead it: the copy budget of applyJsonPatch (a
// patch of a few hundred bytes whose copies double the doc is refused, and the client reads the
// whole doc instead), and a whole doc at the version held with another value (two computes of one
// version): it replaces the doc held and is delivered, and a patch from that version applies to
// it. Run: node --test tests/browser/
'use strict';
const { test, describe } = require('node:test');
const assert = require('node:assert');
const DocsyncClient = require('../../worker/gateway/assets/docsync-client.js');
const {tick} = require('./fakes.js');
const {C, V, lsn, wsDoc, wsPatch, wsClient} = require('./patch_fakes.js');

const { applyJsonPatch } = DocsyncClient;

describe('applyJsonPatch: the copy budget', () => {
  // 14 doublings: 1.6 MB from a doc of 100 bytes and a patch of 500 (40 would exhaust memory).
  test('copies that double the doc are refused once they pass the base and the patch', () => {
    const ops = [];
    for (let i = 0; i < 14; i++) ops.push({ op: 'copy', from: '', path: '/c' + i });
    const t0 = Date.now();
    assert.throws(() => applyJsonPatch({ a: 'x'.repeat(100) }, ops),
                  (e) => e.name === 'PatchError' && /operation \d+ \(copy\): the copies would pass their budget/.test(e.message));
    assert.ok(Date.now() - t0 < 1000, 'refused at once');
  });

  test('copies within the budget apply: as much as the base and the patch hold', () => {
    const doc = { a: 'x'.repeat(1000), b: [1, 2, 3] };
    assert.deepStrictEqual(applyJsonPatch(doc, [{ op: 'copy', from: '/a', path: '/c' }, { op: 'copy', from: '/b', path: '/d' }]),
                           { ...doc, c: doc.a, d: [1, 2, 3] });
    // The whole doc once fits (the base's size), twice does not.
    assert.deepStrictEqual(Object.keys(applyJsonPatch(doc, [{ op: 'copy', from: '', path: '/all' }])), ['a', 'b', 'all']);
    assert.throws(() => applyJsonPatch(doc, [{ op: 'copy', from: '', path: '/x' }, { op: 'copy', from: '', path: '/y' }]),
                  (e) => e.name === 'PatchError' && /operation 1 \(copy\)/.test(e.message));
  });

  test('the client refuses such a patch (bad_patch) and reads the whole doc instead', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x10, { a: 'x'.repeat(100) }));
    const ops = [];
    for (let i = 0; i < 14; i++) ops.push({ op: 'copy', from: '', path: '/c' + i });
    ws.push(wsPatch(0x10, 0x20, ops));
    assert.deepStrictEqual(c.errors.map((e) => e.error), ['bad_patch']);
    await fetch.answer(200, {channel: C, doc: {a: 'y'}, generation: 1, lsn: lsn(0x20)});
    assert.deepStrictEqual(h.versions(), [V(0x10), V(0x20)]);
    assert.deepStrictEqual(h.got[1].doc, { a: 'y' });
    c.close();
  });
});

describe('client: a second value at the version held', () => {
  test('a whole doc at the version held with another value replaces it; a patch from it applies to it', async () => {
    const { c, h, ws, fetch } = await wsClient();
    ws.push(wsDoc(0x10, { items: [1, 2], n: 1 }));
    ws.push(wsDoc(0x10, { n: 1, items: [1, 2] }));  // the same value (keys in another order): not again
    assert.deepStrictEqual(h.versions(), [V(0x10)]);
    ws.push(wsDoc(0x10, { items: [2, 1], n: 1 }));  // another value at that version: delivered
    assert.deepStrictEqual(h.versions(), [V(0x10), V(0x10)]);
    assert.deepStrictEqual(h.got[1].doc, { items: [2, 1], n: 1 });
    ws.push(wsPatch(0x10, 0x20, [{ op: 'replace', path: '/n', value: 2 }]));
    assert.deepStrictEqual(h.versions(), [V(0x10), V(0x10), V(0x20)]);
    assert.deepStrictEqual(h.got[2].doc, { items: [2, 1], n: 2 });
    // Older or equal versions after that are dropped as before.
    ws.push(wsDoc(0x10, { items: [1, 2], n: 1 }));
    ws.push(wsPatch(0x10, 0x20, [{ op: 'replace', path: '/n', value: 9 }]));
    await tick(5);
    assert.strictEqual(h.got.length, 3);
    assert.strictEqual(fetch.calls.length, 0);
    assert.deepStrictEqual(c.errors, []);
    c.close();
  });
});

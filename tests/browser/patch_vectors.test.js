// The property test of docsync-client.js's patches, in headless Chromium: random edits of random
// docs (nested objects, arrays with inserts, deletes and moves, unicode and escapes, numbers at the
// edges), made by the patch core's generator (tests/tools/patch_vectors.cpp), each line a base doc,
// the next version and the patch the worker's diff makes between them. For every line,
// applyJsonPatch or applyMergePatch on JSON.parse(base) must equal JSON.parse(next) (the same
// values: -0 is not 0, key sets equal), without changing the base (it is frozen); and following each
// run of versions from the doc the previous patch made, not from a fresh parse, must give every
// version. Run by tests/scenarios/gateway_patches.sh; skipped without:
//   PATCH_VECTORS  the built tool (build/dev/patch_vectors)
//   SEEDS          the seeds (default 1,2,3,4), COUNT lines each (default 1000), in each of the modes
//                  numbers at the edges (the default), --ordinary and --all-forms
//   CHROMIUM       the browser (default /usr/bin/chromium)
'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { launchChromium } = require('./chromium.js');

const env = process.env;
const skip = env.PATCH_VECTORS ? false : 'needs PATCH_VECTORS (tests/scenarios/gateway_patches.sh sets it)';
const seeds = (env.SEEDS || '1,2,3,4').split(',').map(Number);
const count = Number(env.COUNT || 1000);
const modes = [[], ['--ordinary'], ['--all-forms']];
const clientJs = path.join(__dirname, '../../worker/gateway/assets/docsync-client.js');

// In the page: checks each line, returns counts and the first failures.
function checkInPage(lines) {
  const C = window.DocsyncClient;
  const same = (a, b) => {
    if (typeof a === 'number' || typeof b === 'number') return Object.is(a, b);
    if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
    if (Array.isArray(a) !== Array.isArray(b)) return false;
    const ka = Object.keys(a), kb = Object.keys(b);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && same(a[k], b[k]));
  };
  const freeze = (v) => {
    if (v && typeof v === 'object' && !Object.isFrozen(v)) { Object.values(v).forEach(freeze); Object.freeze(v); }
    return v;
  };
  const apply = (doc, v) => (v.form === 'patch' ? C.applyJsonPatch(doc, v.patch) : C.applyMergePatch(doc, v.patch));
  const out = { lines: 0, patch: 0, merge: 0, chained: 0, failures: [], ops: {}, edges: { inf: 0, negZero: 0, bigInt: 0, astral: 0 } };
  const fail = (i, what, line) => { if (out.failures.length < 5) out.failures.push(`line ${i + 1}: ${what}: ${line.slice(0, 600)}`); };
  let held;  // the doc the previous line's patch made (frozen, as if handed to a handler)
  lines.forEach((line, i) => {
    const v = JSON.parse(line);
    out.lines++;
    out[v.form]++;
    if (v.form === 'patch') v.patch.forEach((op) => { out.ops[op.op] = (out.ops[op.op] || 0) + 1; });
    if (/[0-9][eE][+]?[0-9]{3}/.test(line)) out.edges.inf++;
    if (/[:,[]-0[,}\]]/.test(line)) out.edges.negZero++;
    if (/[0-9]{17}/.test(line)) out.edges.bigInt++;
    if (/[\ud800-\udbff]|\\u[dD][89abAB]/.test(line)) out.edges.astral++;
    const base = freeze(v.base);
    const before = JSON.stringify(base);
    let got;
    try { got = apply(base, v); } catch (e) { fail(i, `throws ${e.message}`, line); return; }
    if (JSON.stringify(base) !== before) fail(i, 'the base changed', line);
    if (!same(got, v.next)) fail(i, `gives ${JSON.stringify(got).slice(0, 300)}`, line);
    // the run of versions: the previous result as this line's base, when it is that version
    if (held !== undefined && same(held, v.base)) {
      const heldBefore = JSON.stringify(held);
      let chained;
      try { chained = apply(held, v); } catch (e) { fail(i, `throws on the previous result: ${e.message}`, line); return; }
      if (!same(chained, v.next)) fail(i, 'gives another doc from the previous result', line);
      if (JSON.stringify(held) !== heldBefore) fail(i, 'the previous result changed', line);
      out.chained++;
      held = freeze(chained);
    } else {
      held = freeze(got);
    }
  });
  return out;
}

test('patch vectors in Chromium: base + patch = next for every version', { skip, timeout: 300000 }, async () => {
  const browser = await launchChromium(env);
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.setContent('<!doctype html><title>patch vectors</title>');
    await page.addScriptTag({ path: clientJs });
    let total = 0;
    const ops = {};
    const edges = { inf: 0, negZero: 0, bigInt: 0, astral: 0 };
    for (const seed of seeds) {
      for (const mode of modes) {
        const text = execFileSync(env.PATCH_VECTORS, [String(seed), String(count), ...mode], { maxBuffer: 1 << 30 }).toString();
        const lines = text.split('\n').filter(Boolean);
        assert.ok(lines.length >= count * 0.9, `patch_vectors ${seed} ${count} ${mode.join(' ')}: only ${lines.length} lines`);
        const r = await page.evaluate(checkInPage, lines);
        const what = `seed ${seed} ${mode.join(' ') || '(edges)'}`;
        assert.deepStrictEqual(r.failures, [], `${what}: ${r.failures.length} failures`);
        assert.strictEqual(r.lines, lines.length);
        assert.ok(r.patch > 0 && r.merge > 0, `${what}: both forms (${r.patch} JSON Patch, ${r.merge} merge)`);
        assert.ok(r.chained > lines.length / 2, `${what}: only ${r.chained} lines followed on from the previous result`);
        total += r.lines;
        Object.entries(r.ops).forEach(([k, n]) => { ops[k] = (ops[k] || 0) + n; });
        Object.entries(r.edges).forEach(([k, n]) => { edges[k] += n; });
      }
    }
    assert.deepStrictEqual(errors, []);
    for (const op of ['add', 'remove', 'replace']) assert.ok(ops[op] > 0, `no ${op} operation among the vectors`);
    assert.ok(edges.inf > 0 && edges.bigInt > 0 && edges.astral > 0, `numbers at the edges and astral unicode: ${JSON.stringify(edges)}`);
    console.log(`chromium: ${total} vectors (seeds ${seeds.join(',')}) all equal; ops ${JSON.stringify(ops)}; edges ${JSON.stringify(edges)}`);
  } finally {
    await browser.close();
  }
});

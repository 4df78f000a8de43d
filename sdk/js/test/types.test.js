// forewarn.d.ts declares every export of forewarn.js, so editors complete what plugins can
// import (a new export without its declaration fails here).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const source = (name) => readFileSync(new URL(`../${name}`, import.meta.url), 'utf8');

/** The names a module exports: `export const|function|class NAME`, `export const { A, B }`. */
function exportedNames(text) {
  const names = new Set();
  for (const match of text.matchAll(/^export\s+(?:const|let|function|class)\s+([A-Za-z_$][\w$]*)/gm)) {
    names.add(match[1]);
  }
  for (const match of text.matchAll(/^export\s+const\s+\{([^}]*)\}/gm)) {
    for (const name of match[1].split(',')) names.add(name.trim());
  }
  return names;
}

test('every export of forewarn.js is declared in forewarn.d.ts', () => {
  const exported = exportedNames(source('forewarn.js'));
  const declared = exportedNames(source('forewarn.d.ts'));
  assert.ok(exported.size >= 15, `only ${exported.size} exports found: ${[...exported]}`);
  const undeclared = [...exported].filter((name) => !declared.has(name));
  assert.deepEqual(undeclared, [], 'add these to forewarn.d.ts');
  const stale = [...declared].filter((name) => !exported.has(name));
  assert.deepEqual(stale, [], 'forewarn.d.ts declares what forewarn.js does not export');
});

test('package.json points editors at the declarations', () => {
  const pkg = JSON.parse(source('package.json'));
  assert.equal(pkg.types, './forewarn.d.ts');
  assert.equal(pkg.exports['.'].types, './forewarn.d.ts');
  assert.ok(pkg.files.includes('forewarn.d.ts'));
});

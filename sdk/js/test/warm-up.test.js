// warm-up.test.js — the SDK's engine warm-up (warm-up.js) reaches a function's own global and
// never stops a module from loading.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import vm from 'node:vm';

import { WARMED_UP_MARK, warmUp } from '../warm-up.js';

test("warms the global of a function from another realm, as the component's bindings are", () => {
  const bindings = vm.createContext({});
  const bindingsFunction = vm.runInContext('(function log() {})', bindings);
  warmUp(bindingsFunction);
  assert.equal(vm.runInContext(`globalThis[${JSON.stringify(WARMED_UP_MARK)}]`, bindings), true);
  assert.equal(globalThis[WARMED_UP_MARK], true);
});

test('a function of this realm, or none, only warms this global and throws nothing', () => {
  assert.doesNotThrow(() => warmUp(() => undefined));
  assert.doesNotThrow(() => warmUp(undefined));
  assert.doesNotThrow(() => warmUp({}));
});

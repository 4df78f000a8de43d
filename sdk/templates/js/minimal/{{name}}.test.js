// {{name}}.test.js — native tests of {{name}} (node --test): the SDK's TestHost stands in for
// the daemon and records every host call the plugin makes.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { approve, context, event, loadPlugin, TestHost } from 'forewarn-sdk/testing';

// Loaded through the SDK (not a static import) so that `from 'forewarn'` resolves natively.
const plugin = await loadPlugin('./{{name}}.js', import.meta.url);

test('prepare reads the greeting and approves', () => {
  const host = new TestHost('{{name}}').config('greeting', 'hi');
  assert.deepEqual(host.onEvent(plugin, event('reboot'), 'prepare'), approve());
  assert.ok(host.calls.some((c) => c.name === 'config' && c.args[0] === 'greeting'));
  assert.equal(host.logs.length, 1);
  assert.deepEqual(host.effects, []); // no state, HTTP, actions or readiness changes
});

test('every phase is answered', () => {
  for (const phase of ['prepare', 'started', 'ended-after-start', 'ended-without-start']) {
    assert.deepEqual(new TestHost('{{name}}').onEvent(plugin, event('freeze'), phase), approve(), phase);
  }
});

test('events for other VMs are approved without work', () => {
  const host = new TestHost('{{name}}');
  const other = event('reboot', { resources: ['another-vm'] });
  assert.deepEqual(host.onEvent(plugin, other, 'prepare', context({ affectsThisVm: false })), approve());
  assert.deepEqual(host.calls, []);
});

test('onStart makes no changes', () => {
  const host = new TestHost('{{name}}');
  host.onStart(plugin);
  assert.deepEqual(host.effects, []);
});

// {{name}}.test.js — native tests of {{name}} (node --test): the SDK's TestHost stands in for
// the daemon (the readiness grant, the drain service's answers) and records every host call
// the plugin makes.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { approve, context, EVENT_ID, event, loadPlugin, TestHost } from 'forewarn-sdk/testing';

// Loaded through the SDK (not a static import) so that `from 'forewarn'` resolves natively.
const plugin = await loadPlugin('./{{name}}.js', import.meta.url);

const DRAIN_URL = 'http://127.0.0.1:9000/drain';

// A host that grants readiness and has drain-url configured.
const host = () => new TestHost('{{name}}').ready().config('drain-url', DRAIN_URL);

const reason = (decision) => (decision.tag === 'defer' ? decision.val.reason : '');

test('prepare takes the VM out of rotation, posts to the drain URL and approves', () => {
  const h = host().httpReply('POST', DRAIN_URL, 200);
  assert.deepEqual(h.onEvent(plugin, event('reboot'), 'prepare'), approve());
  assert.equal(h.isReady, false); // out of rotation
  assert.equal(h.httpRequests.length, 1);
  const [sent] = h.httpRequests;
  assert.deepEqual([sent.method, sent.url], ['POST', DRAIN_URL]);
  assert.deepEqual(JSON.parse(sent.text()), { event_id: EVENT_ID, event_type: 'reboot' });
  // Out of rotation first, then the service is told.
  assert.deepEqual(h.effects.map((c) => c.name), ['set-ready', 'http-send']);
});

test('an error answer defers and keeps the VM out of rotation', () => {
  const h = host().httpReply('POST', DRAIN_URL, 503, 'busy');
  const decision = h.onEvent(plugin, event('redeploy'), 'prepare');
  assert.equal(reason(decision), `the drain at ${DRAIN_URL} answered 503`);
  assert.equal(h.isReady, false);
});

test('an unreachable service defers with the reason', () => {
  const h = host().httpError('POST', DRAIN_URL, 'failed', 'connection refused');
  const decision = h.onEvent(plugin, event('reboot'), 'prepare');
  assert.equal(reason(decision), `the drain at ${DRAIN_URL}: failed: connection refused`);
});

test('without the readiness grant it defers before telling the service', () => {
  const h = new TestHost('{{name}}').httpReply('POST', plugin.DRAIN_URL_DEFAULT, 200);
  const decision = h.onEvent(plugin, event('reboot'), 'prepare');
  assert.match(reason(decision), /add `readiness = true` under \[capabilities\]/);
  assert.deepEqual(h.httpRequests, []);
});

for (const end of ['ended-after-start', 'ended-without-start']) {
  test(`${end} puts the VM back in rotation`, () => {
    const h = host().httpReply('POST', DRAIN_URL, 204);
    const reboot = event('reboot');
    h.onEvent(plugin, reboot, 'prepare');
    h.onEvent(plugin, reboot, 'started');
    assert.equal(h.isReady, false); // still out of rotation while it runs
    assert.deepEqual(h.onEvent(plugin, reboot, end), approve());
    assert.equal(h.isReady, true);
  });
}

test('events for other VMs change nothing', () => {
  const h = host();
  const other = event('reboot', { resources: ['another-vm'] });
  for (const phase of ['prepare', 'ended-after-start']) {
    assert.deepEqual(h.onEvent(plugin, other, phase, context({ affectsThisVm: false })), approve());
  }
  assert.deepEqual(h.effects, []);
});

// test/testing.test.js — tests of testing.js, the JS SDK's native test host (run: sdk/js/test.sh).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { approve, context, defer, event, HostError, loadPlugin, startContext, TestHost } from '../testing.js';

const plugin = await loadPlugin('./fixtures/drain.js', import.meta.url);
const { HOOK } = plugin;
const STORAGE = 'https://storage.azure.com/';
const BLOB = 'https://acct.blob.core.windows.net/c/x';

const fullHost = () => new TestHost('drain').config('retry-ms', '7000')
  .httpReply('POST', HOOK, 204).httpReply('PUT', BLOB, 201)
  .actionResult('drain', 0, 'drained').accessToken(STORAGE, 'tok-1').ready().state('count', '41');

test('approves and records every call in order', () => {
  const host = fullHost();
  assert.deepEqual(host.onEvent(plugin, event('reboot'), 'prepare'), approve());
  assert.deepEqual(host.effects.map((c) => c.name), ['http-send', 'run-action', 'http-send', 'set-ready', 'state-set']);
  const [first, second] = host.httpRequests;
  assert.deepEqual([first.method, first.url, first.text()], ['POST', HOOK, '{"drain": true}']);
  assert.deepEqual(first.headers, [['content-type', 'application/json']]);
  assert.deepEqual(second.headers, [['authorization', 'Bearer tok-1']]);
  assert.deepEqual(host.actionsRun, ['drain']);
  assert.deepEqual(host.tokensRequested, [STORAGE]);
  assert.deepEqual(host.stateWrites, [['count', '42']]);
  assert.equal(host.isReady, false);
  assert.deepEqual(host.logs, [['info', 'Reboot test-event-1']]);
});

test('a stubbed failure reaches the plugin', () => {
  let host = fullHost().httpReply('POST', HOOK, 503);
  assert.deepEqual(host.onEvent(plugin, event(), 'prepare'), defer('hook answered 503', 7000));
  assert.deepEqual(host.actionsRun, []);
  host = fullHost().actionResult('drain', 3);
  assert.deepEqual(host.onEvent(plugin, event(), 'prepare'), defer('drain exited 3', 7000));
});

test('ungranted calls throw not-granted naming the manifest line', () => {
  const host = new TestHost('drain');
  assert.throws(() => host.onEvent(plugin, event(), 'prepare'), (error) => error instanceof HostError
    && error.kind === 'not-granted' && error.detail.includes('"hooks.internal:8080" to [capabilities] http in drain.toml'));
  assert.equal(host.httpRequests.length, 1);
});

test('errors, handlers and invalid URLs', async () => {
  const sdk = await import('forewarn');
  const host = new TestHost().httpError('GET', 'http://a:1/', 'timed-out')
    .httpHandler((request) => [418, request.url]).actionError('drain', 'failed', 'no such file');
  assert.throws(() => host.run(() => sdk.http.get('http://a:1/')), { kind: 'timed-out' });
  const answer = host.run(() => sdk.http.get('http://b:2/x'));
  assert.deepEqual([answer.status, answer.text()], [418, 'http://b:2/x']);
  assert.throws(() => host.run(() => sdk.runAction('drain')), { kind: 'failed', detail: 'no such file' });
  assert.throws(() => host.run(() => sdk.http.get('hooks/x')), { kind: 'invalid' });
  assert.throws(() => host.run(() => sdk.setReady(true)), { kind: 'not-granted' });
  assert.throws(() => new TestHost().httpError('GET', HOOK, 'nope'), TypeError);
  // Outside TestHost.run: an empty host that grants nothing, never a crash.
  assert.equal(sdk.config('retry-ms'), undefined);
});

test('state carries over between calls and phases; onStart runs with the host', () => {
  const host = fullHost().config('restore-from', 'blob');
  host.onStart(plugin, startContext({ firstRun: true }));
  assert.equal(host.stateText('restored'), 'blob');
  host.onEvent(plugin, event(), 'prepare');
  host.onEvent(plugin, event(), 'prepare');
  assert.equal(host.stateText('count'), '43');
  host.state('drained', 'yes');
  assert.deepEqual(host.onEvent(plugin, event(), 'ended-after-start'), approve());
  assert.equal(host.stateNow.has('drained'), false);
  assert.deepEqual(host.stateWrites.at(-1), ['drained', undefined]);
});

test('inputs are consistent and replaceable', () => {
  const ev = event('preempt', { resources: ['other-vm'] });
  assert.equal(ev.eventTypeRaw, 'Preempt');
  assert.equal(typeof ev.notBeforeUnixMs, 'bigint');
  assert.equal(context({ attempt: 3 }).attempt, 3);
});

test('drainProgress answers what the test stubbed, in order, the last one repeating', async () => {
  const sdk = await import('forewarn');
  const host = new TestHost();
  assert.throws(() => host.run(() => sdk.drainProgress(3)), { kind: 'not-granted' });
  host.ready();
  assert.deepEqual(host.run(() => sdk.drainProgress(3)),
    { probers: 0, probersDrained: 0, drainedForMs: undefined, notReadyForMs: undefined });
  host.drainProgress({ probers: 2, probersDrained: 1 })
    .drainProgress({ probers: 2, probersDrained: 2, drainedForMs: 1500, notReadyForMs: 4000 });
  assert.equal(host.run(() => sdk.drainProgress(3)).probersDrained, 1);
  const drained = host.run(() => sdk.drainProgress(3));
  assert.deepEqual([drained.drainedForMs, drained.notReadyForMs], [1500, 4000]);
  assert.equal(host.run(() => sdk.drainProgress(3)).drainedForMs, 1500);
  assert.throws(() => host.run(() => sdk.drainProgress(17)), { kind: 'invalid' });
  assert.equal(host.calls.filter((call) => call.name === 'drain-progress').length, 6);
});

test('handler lets a native test see the exception onEvent threw', async () => {
  const { handler } = await import('../forewarn.js');
  const made = handler(() => {
    throw new RangeError('boom');
  });
  assert.throws(() => made.onEvent(event(), 'prepare', context()), { name: 'RangeError', message: 'boom' });
});

test('handler without onEvent names the export to add', async () => {
  const { handler } = await import('../forewarn.js');
  assert.throws(() => handler(undefined), { name: 'TypeError', message: /export `function onEvent\(event, phase, ctx\)`/ });
});

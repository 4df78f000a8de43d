// testing.js — native unit tests of JavaScript plugins (node --test), without the daemon.
//
// A TestHost stands in for the daemon: give it config values, state, HTTP answers, action
// results, access tokens and the readiness grant; run the plugin's real onEvent (or onStart)
// through it; then assert on the decision and on the calls the plugin made:
//
//   import { TestHost, loadPlugin, event, context, approve } from '/path/to/sdk/js/testing.js';
//   const plugin = await loadPlugin('./my-plugin.js', import.meta.url);
//   const host = new TestHost().config('url', 'http://hooks:8080/x').httpReply('POST', 'http://hooks:8080/x', 204);
//   assert.deepEqual(host.onEvent(plugin, event('reboot'), 'prepare'), approve());
//   assert.deepEqual(host.httpRequests.map((r) => r.url), ['http://hooks:8080/x']);
//
// The plugin is loaded with loadPlugin (not a static import): its `import … from 'forewarn'` and
// the SDK's host import resolve through testing/hooks.js. What was not given is answered as the
// daemon answers a plugin whose manifest grants nothing: config and state.get give undefined;
// setReady, http, runAction and identity throw HostError 'not-granted' naming the manifest line;
// a URL that is not absolute http(s) is 'invalid'. Log lines are recorded and printed to stderr.
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';

import { install } from './testing/native-host.js';

register('./testing/hooks.js', import.meta.url);

const sdk = await import('forewarn');
export const { approve, defer, HostError } = sdk;

/** The VM the test inputs describe; event() lists it in resources. */
export const VM_NAME = 'test-vm';
/** The id of event(). */
export const EVENT_ID = 'test-event-1';
/** context()'s time to NotBefore: 15 minutes, a platform event's usual notice. */
export const NOTICE_MS = 15 * 60 * 1000;
/** context()'s and startContext()'s time to the deadline: 10 seconds. */
export const BUDGET_MS = 10 * 1000;

const KINDS = ['not-granted', 'invalid', 'failed', 'timed-out'];
const EFFECTS = ['state-set', 'state-delete', 'set-ready', 'http-send', 'run-action'];
const nowMs = () => BigInt(Date.now());
const bytes = (value) => (typeof value === 'string' ? new TextEncoder().encode(value) : Uint8Array.from(value ?? []));

/** Imports a plugin module (path relative to `base`, e.g. import.meta.url) with `forewarn`
 * resolved to this SDK and host calls going to the current TestHost. */
export async function loadPlugin(path, base = pathToFileURL(`${process.cwd()}/`).href) {
  return import(new URL(path, base).href);
}

// ---- Test inputs with sensible defaults; `fields` replace any of them ----

/** A Scheduled Event of `eventType` ('freeze', 'reboot', …) for VM_NAME, 15 minutes from now
 * (30 seconds for a preempt). u64/s64 fields are BigInts, as in the component. */
export function event(eventType = 'reboot', fields = {}) {
  const raw = eventType === 'unknown' ? 'Unknown' : eventType[0].toUpperCase() + eventType.slice(1);
  const notice = eventType === 'preempt' ? 30_000n : BigInt(NOTICE_MS);
  return {
    id: EVENT_ID, eventType, eventTypeRaw: raw, resourceType: 'VirtualMachine', resources: [VM_NAME],
    status: 'scheduled', notBeforeUnixMs: nowMs() + notice, description: `${raw} scheduled by the test`,
    source: 'platform', durationSeconds: undefined, ...fields,
  };
}

/** This VM (regular), first attempt, 15 minutes to NotBefore, 10 seconds to answer. */
export function context(fields = {}) {
  return {
    vmName: VM_NAME, affectsThisVm: true, deadlineUnixMs: nowMs() + BigInt(BUDGET_MS), attempt: 1,
    untilNotBeforeMs: BigInt(NOTICE_MS), vm: { priority: 'regular', evictionPolicy: undefined }, ...fields,
  };
}

/** context() consistent with `ev`: whether it names VM_NAME, and its NotBefore. */
export function contextFor(ev, fields = {}) {
  const now = nowMs();
  const until = ev.notBeforeUnixMs === undefined ? undefined
    : (ev.notBeforeUnixMs > now ? ev.notBeforeUnixMs - now : 0n);
  return context({ affectsThisVm: ev.resources.includes(VM_NAME), untilNotBeforeMs: until, ...fields });
}

/** What onStart is told: this VM, not a first run, 10 seconds to return. */
export function startContext(fields = {}) {
  return {
    vmName: VM_NAME, vm: { priority: 'regular', evictionPolicy: undefined }, firstRun: false,
    deadlineUnixMs: nowMs() + BigInt(BUDGET_MS), ...fields,
  };
}

// The error a component's host call throws: its payload is the WIT host-error variant.
function hostError(kind, detail) {
  if (!KINDS.includes(kind)) {
    throw new TypeError(`unknown host error kind '${kind}': use one of ${KINDS.join(', ')}`);
  }
  const error = new Error(`host error: ${kind}`);
  error.payload = kind === 'timed-out' ? { tag: kind } : { tag: kind, val: detail ?? '' };
  return error;
}

function response(status, body = '', headers = []) {
  return { status: Number(status), headers: [...headers], body: bytes(body) };
}

/** host:port of an absolute http(s) URL; throws an 'invalid' host error for anything else. */
function authority(url) {
  const match = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\/([^/?#]*)/.exec(url);
  if (!match) throw hostError('invalid', `\`${url}\` is not an absolute URL: relative URL without a base`);
  const port = { http: 80, https: 443 }[match[1].toLowerCase()];
  if (port === undefined) throw hostError('invalid', `\`${url}\`: scheme \`${match[1]}\` is not supported; use http:// or https://`);
  const hostPort = match[2].split('@').pop().toLowerCase();
  if (!hostPort) throw hostError('invalid', `\`${url}\` names no host`);
  return /:\d+$/.test(hostPort) ? hostPort : `${hostPort}:${port}`;
}

/** The daemon, as a plugin's native test sets it up. Setters return the host, so they chain;
 * config, state and stubs carry over from one call to the next. */
export class TestHost {
  constructor(plugin = 'test-plugin') {
    this.plugin = plugin;
    /** Every host call in order: { name: 'log' | 'config' | 'state-get' | 'state-set' |
     * 'state-delete' | 'set-ready' | 'drain-progress' | 'http-send' | 'run-action' |
     * 'azure-access-token', args }. */
    this.calls = [];
    this.state_ = new Map();
    this.config_ = new Map();
    this.http_ = new Map();
    this.actions_ = new Map();
    this.tokens_ = new Map();
    this.readinessGranted = false;
    this.drainAnswers_ = [];
    this.httpHandler_ = undefined;
    /** What the plugin last set with setReady (undefined: never, or not granted). */
    this.isReady = undefined;
  }

  // ---- What the plugin will find ----

  /** A value of the manifest's [config] table. */
  config(key, value) { this.config_.set(key, String(value)); return this; }

  /** A value already in the plugin's durable state (a string is stored UTF-8). */
  state(key, value) { this.state_.set(key, bytes(value)); return this; }

  /** Grants (or not) the readiness capability, so setReady succeeds. */
  ready(granted = true) { this.readinessGranted = granted; return this; }

  /** What drainProgress answers: `{ probers, probersDrained, drainedForMs, notReadyForMs }`
   * (times in ms or undefined). Given again, answers queue; the last one repeats. Without
   * one, no load balancer probes /readyz. */
  drainProgress(progress) { this.drainAnswers_.push(progress); return this; }

  /** Answers requests of `method` to exactly `url` with `status` and `body`. */
  httpReply(method, url, status, body = '', headers = []) {
    this.http_.set(`${method.toUpperCase()} ${url}`, response(status, body, headers));
    return this;
  }

  /** Requests of `method` to `url` fail with a host error of `kind`. */
  httpError(method, url, kind, detail = '') {
    this.http_.set(`${method.toUpperCase()} ${url}`, hostError(kind, detail));
    return this;
  }

  /** Answers requests no httpReply/httpError matched: `handler(request)` returns a status,
   * [status, body], { status, headers, body }, or throws (e.g. a TestHost.error(kind)). */
  httpHandler(handler) { this.httpHandler_ = handler; return this; }

  /** Grants action `name`; running it returns this output (exitCode undefined: killed). */
  actionResult(name, exitCode = 0, stdout = '', stderr = '') {
    this.actions_.set(name, { exitCode, stdout, stderr });
    return this;
  }

  /** Running action `name` fails with a host error of `kind`. */
  actionError(name, kind, detail = '') { this.actions_.set(name, hostError(kind, detail)); return this; }

  /** Grants `resource` in azure-identity; asking for it returns `token` (valid for an hour). */
  accessToken(resource, token, expiresOnUnixMs = Date.now() + 3_600_000) {
    this.tokens_.set(resource, { token, expiresOnUnixMs: BigInt(expiresOnUnixMs) });
    return this;
  }

  /** Asking for a token for `resource` fails with a host error of `kind`. */
  accessTokenError(resource, kind, detail = '') { this.tokens_.set(resource, hostError(kind, detail)); return this; }

  /** The error a host call throws, for an httpHandler: TestHost.error('failed', 'refused'). */
  static error(kind, detail = '') { return hostError(kind, detail); }

  // ---- Running the plugin ----

  /** Calls `code()` with this host answering the SDK's host calls; returns its result. */
  run(code) {
    const restore = install(this, emptyHost);
    try {
      return code();
    } finally {
      restore();
    }
  }

  /** The plugin's onEvent(ev, phase, ctx) (`plugin`: its module, or the function) with this
   * host; `ctx` defaults to contextFor(ev). Exceptions propagate. */
  onEvent(plugin, ev, phase, ctx = contextFor(ev)) {
    const onEvent = typeof plugin === 'function' ? plugin : plugin.onEvent;
    return this.run(() => onEvent(ev, phase, ctx));
  }

  /** The plugin's onStart(ctx) with this host; nothing when it has none. */
  onStart(plugin, ctx = startContext()) {
    const onStart = typeof plugin === 'function' ? plugin : plugin.onStart;
    if (onStart !== undefined) this.run(() => onStart(ctx));
  }

  // ---- What the plugin did ----

  /** The calls that changed something: state writes, readiness, HTTP, actions. */
  get effects() { return this.calls.filter((c) => EFFECTS.includes(c.name)); }
  /** The HTTP requests sent, in order: { method, url, headers, body (Uint8Array), text() }. */
  get httpRequests() { return this.argsOf('http-send').map(([request]) => request); }
  /** The names of the actions run, in order (granted or not). */
  get actionsRun() { return this.argsOf('run-action').map(([name]) => name); }
  /** The resources access tokens were asked for, in order. */
  get tokensRequested() { return this.argsOf('azure-access-token').map(([resource]) => resource); }
  /** [key, value as text] per state write in order; value undefined for a delete. */
  get stateWrites() {
    return this.calls.filter((c) => c.name === 'state-set' || c.name === 'state-delete')
      .map((c) => [c.args[0], c.name === 'state-set' ? new TextDecoder().decode(c.args[1]) : undefined]);
  }
  /** [level, message] per log line. */
  get logs() { return this.argsOf('log'); }
  /** A state value as UTF-8 text, or undefined when absent. */
  stateText(key) {
    const value = this.state_.get(key);
    return value === undefined ? undefined : new TextDecoder().decode(value);
  }
  /** The plugin's state as it stands: a Map of key to Uint8Array. */
  get stateNow() { return new Map(this.state_); }

  argsOf(name) { return this.calls.filter((c) => c.name === name).map((c) => c.args); }

  // ---- The host imports (called by testing/native-host.js) ----

  record(name, ...args) { this.calls.push({ name, args }); }

  import_log(level, message) {
    this.record('log', level, message);
    process.stderr.write(`[${this.plugin}] ${level}: ${message}\n`);
  }

  import_config(key) { this.record('config', key); return this.config_.get(key); }

  import_stateGet(key) { this.record('state-get', key); return this.state_.get(key); }

  import_stateSet(key, value) { this.record('state-set', key, bytes(value)); this.state_.set(key, bytes(value)); }

  import_stateDelete(key) { this.record('state-delete', key); this.state_.delete(key); }

  import_setReady(ready) {
    this.record('set-ready', ready);
    if (!this.readinessGranted) {
      throw hostError('not-granted', `plugin \`${this.plugin}\` may not change readiness: add \`readiness = true\` under [capabilities] in its manifest`);
    }
    this.isReady = ready;
  }

  import_drainProgress(threshold) {
    this.record('drain-progress', threshold);
    if (!this.readinessGranted) {
      throw hostError('not-granted', `plugin \`${this.plugin}\` may not change readiness: add \`readiness = true\` under [capabilities] in its manifest`);
    }
    if (!(threshold >= 1 && threshold <= 16)) {
      throw hostError('invalid', `unhealthy-threshold ${threshold} is out of range: give the load balancer's own threshold, 1 to 16`);
    }
    const answer = this.drainAnswers_.length > 1 ? this.drainAnswers_.shift() : this.drainAnswers_[0];
    const given = answer ?? { probers: 0, probersDrained: 0, drainedForMs: undefined, notReadyForMs: undefined };
    const big = (value) => (value === undefined ? undefined : BigInt(value));
    return { ...given, drainedForMs: big(given.drainedForMs), notReadyForMs: big(given.notReadyForMs) };
  }

  import_httpSend(request) {
    const sent = { ...request, headers: [...request.headers], body: bytes(request.body) };
    sent.text = () => new TextDecoder().decode(sent.body);
    this.record('http-send', sent);
    const where = authority(sent.url);
    let reply = this.http_.get(`${sent.method.toUpperCase()} ${sent.url}`);
    if (reply === undefined && this.httpHandler_ !== undefined) reply = this.httpHandler_(sent);
    if (reply === undefined) {
      throw hostError('not-granted', `plugin \`${this.plugin}\` may not send HTTP requests to ${where}: add "${where}" to [capabilities] http in ${this.plugin}.toml (in a test: TestHost.httpReply or httpHandler)`);
    }
    if (reply instanceof Error) throw reply;
    if (typeof reply === 'number') return response(reply);
    if (Array.isArray(reply)) return response(...reply);
    return response(reply.status, reply.body, reply.headers);
  }

  import_runAction(name) {
    this.record('run-action', name);
    const result = this.actions_.get(name);
    if (result === undefined) {
      throw hostError('not-granted', `plugin \`${this.plugin}\` may not run action \`${name}\`: add "${name}" to [capabilities] actions in ${this.plugin}.toml (in a test: TestHost.actionResult)`);
    }
    if (result instanceof Error) throw result;
    return result;
  }

  import_azureAccessToken(resource) {
    this.record('azure-access-token', resource);
    const result = this.tokens_.get(resource);
    if (result === undefined) {
      throw hostError('not-granted', `plugin \`${this.plugin}\` may not ask for access tokens for \`${resource}\`: add "${resource}" to [capabilities] azure-identity in ${this.plugin}.toml (in a test: TestHost.accessToken)`);
    }
    if (result instanceof Error) throw result;
    return result;
  }
}

// Host calls outside TestHost.run go here: an empty host that grants nothing.
const emptyHost = new TestHost();
install(undefined, emptyHost)();

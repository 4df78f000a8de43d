// forewarn.js — the JavaScript SDK for forewarn plugins.
// Import what you need from 'forewarn', export `onEvent` (and, optionally, `onStart`), build
// with sdk/js/build.sh. Targets forewarn:plugin@0.3.0; plugins built against 0.1.0 keep loading.
import * as host from 'forewarn:plugin/host@0.3.0';

import { warmUp } from './warm-up.js';

/** Deferral retry when the plugin does not say, in milliseconds. */
export const DEFAULT_RETRY_AFTER_MS = 5000;

/** Ready: the maintenance may start as far as this plugin cares. */
export function approve() {
  return { tag: 'approve' };
}

/** Not yet: ask again after `retryAfterMs` milliseconds. */
export function defer(reason, retryAfterMs = DEFAULT_RETRY_AFTER_MS) {
  return { tag: 'defer', val: { reason: String(reason), retryAfterMs } };
}

/** Whether the event stops or removes the VM (everything but a Freeze). */
export function takesVmDown(event) {
  return event.eventType !== 'freeze';
}

/** Whether Azure may evict this VM (`ctx.vm`): a Spot or low-priority VM. */
export function isEvictable(vm) {
  return vm.priority === 'spot' || vm.priority === 'low';
}

/** Whether an eviction deletes the VM and its disks (`ctx.vm`): a checkpoint must leave the
 * VM before the Preempt's NotBefore. */
export function evictionDeletesDisks(vm) {
  return isEvictable(vm) && vm.evictionPolicy === 'delete';
}

/** Milliseconds from the start of this call to the event's NotBefore (0 when it has passed),
 * or undefined when the event has no NotBefore (it has started). A number, not a BigInt. */
export function untilNotBeforeMs(ctx) {
  return ctx.untilNotBeforeMs === undefined ? undefined : Number(ctx.untilNotBeforeMs);
}

/** A host call did not do what was asked: `kind` is 'not-granted', 'invalid', 'failed' or 'timed-out'. */
export class HostError extends Error {
  constructor(call, kind, detail) {
    super(detail ? `${call}: ${kind}: ${detail}` : `${call}: ${kind}`);
    this.name = 'HostError';
    this.call = call;
    this.kind = kind;
    this.detail = detail ?? '';
  }
}

// Runs a host call whose WIT result is an error variant, rethrowing it as a HostError.
function hostCall(call, run) {
  try {
    return run();
  } catch (error) {
    const payload = error?.payload ?? error;
    if (payload && typeof payload.tag === 'string') {
      throw new HostError(call, payload.tag, payload.val);
    }
    throw error;
  }
}

/** Lines in the daemon's log under this plugin's name. */
export const log = {
  trace: (message) => host.log('trace', String(message)),
  debug: (message) => host.log('debug', String(message)),
  info: (message) => host.log('info', String(message)),
  warn: (message) => host.log('warn', String(message)),
  error: (message) => host.log('error', String(message)),
};

/** A value from the manifest's [config] table, or `fallback`. */
export function config(key, fallback = undefined) {
  const value = host.config(key);
  return value === undefined ? fallback : value;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// While the component's snapshot is taken (see warm-up.js): every call starts warmer.
warmUp(host.log);

/** This plugin's durable state: survives reloads and restarts. Values are bytes or strings. */
export const state = {
  get: (key) => host.stateGet(key),
  getText: (key) => {
    const bytes = host.stateGet(key);
    return bytes === undefined ? undefined : decoder.decode(bytes);
  },
  set: (key, value) => {
    const bytes = typeof value === 'string' ? encoder.encode(value) : value;
    hostCall('state-set', () => host.stateSet(key, bytes));
  },
  delete: (key) => hostCall('state-delete', () => host.stateDelete(key)),
};

/** Marks this VM ready or not on /readyz (needs `readiness = true`). */
export function setReady(ready) {
  hostCall('set-ready', () => host.setReady(ready));
}

/** What the load balancers probing /readyz have seen since the VM was marked not ready, for
 * load balancers that take a VM out after `unhealthyThreshold` failed probes in a row (their
 * own setting, 1 to 16): `{ probers, probersDrained, drainedForMs, notReadyForMs }`, the two
 * times in milliseconds or undefined (needs `readiness = true`; forewarn:plugin@0.3.0). */
export function drainProgress(unhealthyThreshold) {
  const progress = hostCall('drain-progress', () => host.drainProgress(unhealthyThreshold));
  const millis = (value) => (value === undefined || value === null ? undefined : Number(value));
  return {
    probers: progress.probers,
    probersDrained: progress.probersDrained,
    drainedForMs: millis(progress.drainedForMs),
    notReadyForMs: millis(progress.notReadyForMs),
  };
}

/** Outbound HTTP to the hosts on the manifest's `[capabilities] http` allow-list. */
export const http = {
  send: (method, url, { headers = [], body = new Uint8Array() } = {}) => {
    const bytes = typeof body === 'string' ? encoder.encode(body) : body;
    const response = hostCall('http-send', () => host.httpSend({ method, url, headers, body: bytes }));
    return { ...response, ok: response.status >= 200 && response.status < 300, text: () => decoder.decode(response.body) };
  },
  get: (url) => http.send('GET', url),
  post: (url, body, contentType = 'application/json') =>
    http.send('POST', url, { headers: [['content-type', contentType]], body }),
};

/** Runs an operator-defined action granted to this plugin: { exitCode, stdout, stderr }. */
export function runAction(name) {
  return hostCall('run-action', () => host.runAction(name));
}

/** The VM's Azure managed identity (needs the resource in the manifest's
 * `[capabilities] azure-identity`). */
export const identity = {
  /** The resource of Azure Storage (blobs, queues, tables). */
  STORAGE: 'https://storage.azure.com/',
  /** An access token for `resource`: { token, expiresOnUnixMs (a Number), bearer() }. The host
   * caches tokens and renews them before expiry: ask again rather than keeping one. */
  accessToken: (resource) => {
    const { token, expiresOnUnixMs } = hostCall('azure-access-token', () => host.azureAccessToken(resource));
    return { token, expiresOnUnixMs: Number(expiresOnUnixMs), bearer: () => `Bearer ${token}` };
  },
};

/** Makes the component's `handler` export from plain functions. An exception from `onEvent`
 * is the plugin's failure, like a Rust panic: the SDK logs its stack to stderr and ends the
 * call with one line naming it and where it was thrown (`plugin threw TypeError: … at
 * my-plugin.js:4:9`), so the daemon's failure policy applies (`plugin test` says "trapped").
 * Native tests see the exception itself. Without `onStart` the export's default does nothing;
 * an exception from it is logged. */
export function handler(onEvent, onStart = undefined) {
  if (typeof onEvent !== 'function') {
    throw new TypeError(
      "the plugin's onEvent is not a function: export `function onEvent(event, phase, ctx)` " +
        'returning approve() or defer(...)',
    );
  }
  return {
    onStart(ctx) {
      if (onStart === undefined) {
        return;
      }
      try {
        onStart(ctx);
      } catch (error) {
        log.error(`onStart threw ${error?.name ?? 'error'}: ${error?.message ?? error}`);
      }
    },
    onEvent(event, phase, ctx) {
      try {
        return onEvent(event, phase, ctx);
      } catch (error) {
        crash(error);
      }
    },
  };
}

/** Ends the call the way a Rust panic does: the stack on stderr, then a one-line failure that
 * the component's runtime prints as it traps, placed in the plugin's own source. */
function crash(error) {
  if (globalThis.__forewarnSourceLines === undefined) {
    throw error; // not a built component (a native test): the test sees the exception itself
  }
  if (error?.stack) {
    console.error(error.stack);
  }
  throw `plugin threw ${error?.name ?? 'error'}: ${error?.message ?? error}${thrownAt(error)}`;
}

/** " at FILE:LINE:COLUMN" in the plugin's source for the innermost frame of its own code, from
 * the line table the build appends to the bundle (`globalThis.__forewarnSourceLines`: for
 * each bundle line, [bundleColumn, sourceIndex, line, column] segments, and the sources). */
function thrownAt(error) {
  const table = globalThis.__forewarnSourceLines;
  if (!table || typeof error?.stack !== 'string') {
    return '';
  }
  for (const frame of error.stack.split('\n')) {
    const match = /:(\d+):(\d+)\s*$/.exec(frame);
    if (!match) {
      continue;
    }
    const place = sourcePlace(table, Number(match[1]) - 1, Number(match[2]) - 1);
    if (place && !place.source.endsWith('forewarn.js')) {
      return ` at ${place.source}:${place.line + 1}:${place.column + 1}`;
    }
  }
  return '';
}

function sourcePlace(table, bundleLine, bundleColumn) {
  const segments = table.lines[bundleLine];
  if (!segments) {
    return undefined;
  }
  let found;
  for (const segment of segments) {
    if (segment.length < 4 || segment[0] > bundleColumn) {
      break;
    }
    found = segment;
  }
  found ??= segments.find((segment) => segment.length >= 4);
  if (!found) {
    return undefined;
  }
  return { source: table.sources[found[1]], line: found[2], column: found[3] };
}

// warm-up.js — makes, while the component's snapshot is taken, what the JavaScript engine
// would otherwise make lazily in every call's fresh instance (sdk/js/README.md, "Why the SDK
// warms up").
//
// componentize-js runs a plugin's module top level once, at build time, and snapshots the
// engine's memory: every call starts a fresh instance from that snapshot. SpiderMonkey makes
// a global's standard classes (Uint8Array, BigInt, Promise, …) on first use, so whatever the
// snapshot has not touched is made again in each call. The component's bindings (the glue
// between WIT and JavaScript that componentize-js generates) live in a global of their own,
// and use typed arrays, BigInt, DataView and an async function on every call; warming the
// module's global does not reach them. Their own Function constructor, reached through one of
// their functions, runs the warm-up there. Measured side by side in one run: a made-ahead call
// of the counter example went from 0.30 to 0.18 ms (BENCHMARKS.md, "Plugin call: made ahead,
// from the pool").

/** The property the warm-up sets to true on the bindings' global (tests check it). */
export const WARMED_UP_MARK = 'forewarnWarmedUp';

// Runs in the bindings' global, so it is self-contained: it is passed there as source text.
function warmUpThisGlobal(mark) {
  const bytes = new Uint8Array(new ArrayBuffer(16), 0, 8);
  const view = new DataView(bytes.buffer);
  view.setBigInt64(0, BigInt.asUintN(64, BigInt(1)), true);
  view.getBigInt64(0, true);
  new Uint8Array(bytes.buffer.slice(0, 4));
  [0].push(String(0).charCodeAt(0));
  new Map().set(0, 0);
  JSON.stringify({ warm: [Number('0')] });
  Promise.resolve(0);
  (async () => 0)();
  new TypeError('warm-up');
  globalThis[mark] = true;
}

/** Warms this module's global, then the global of `bindingsFunction` (any function of the
 * bindings, e.g. an import of 'forewarn:plugin/host@0.3.0') when it is another one. The
 * warm-up only saves time: where the engine refuses it, the plugin works as before. */
export function warmUp(bindingsFunction) {
  try {
    warmUpThisGlobal(WARMED_UP_MARK);
    if (typeof bindingsFunction !== 'function') {
      return;
    }
    const BindingsFunction = Object.getPrototypeOf(bindingsFunction)?.constructor;
    if (typeof BindingsFunction !== 'function' || BindingsFunction === Function) {
      return;
    }
    new BindingsFunction('mark', `(${warmUpThisGlobal})(mark);`)(WARMED_UP_MARK);
  } catch {
    // Nothing is lost but time: each call makes these as it did before.
  }
}

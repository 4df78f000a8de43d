// testing/native-host.js — the host imports (forewarn:plugin/host) outside the component: each
// call goes to the TestHost running the plugin (testing.js), else to an empty one that grants
// nothing. Same names and shapes as the bindings componentize-js generates from wit/forewarn.wit.
let current;
let fallback;

/** Makes `host` answer the host calls until `restore()` is called (used by TestHost.run). */
export function install(host, empty) {
  fallback ??= empty;
  const previous = current;
  current = host;
  return () => { current = previous; };
}

const call = (name, ...args) => (current ?? fallback)[`import_${name}`](...args);

export const log = (level, message) => call('log', level, message);
export const config = (key) => call('config', key);
export const stateGet = (key) => call('stateGet', key);
export const stateSet = (key, value) => call('stateSet', key, value);
export const stateDelete = (key) => call('stateDelete', key);
export const setReady = (ready) => call('setReady', ready);
export const drainProgress = (threshold) => call('drainProgress', threshold);
export const httpSend = (request) => call('httpSend', request);
export const azureAccessToken = (resource) => call('azureAccessToken', resource);
export const runAction = (name) => call('runAction', name);

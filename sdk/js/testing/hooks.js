// testing/hooks.js — the module resolve hook of forewarn's native JS tests (registered by
// testing.js): `forewarn` is the SDK, and the component's host import `forewarn:plugin/host@…`
// is testing/native-host.js, which calls the current TestHost. The wasm build never sees this.
const sdk = new URL('../forewarn.js', import.meta.url).href;
const nativeHost = new URL('./native-host.js', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === 'forewarn') {
    return { url: sdk, shortCircuit: true };
  }
  if (specifier.startsWith('forewarn:plugin/host@')) {
    return { url: nativeHost, shortCircuit: true };
  }
  return next(specifier, context);
}

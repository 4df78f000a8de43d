#!/usr/bin/env node
// build.mjs — bundles a JavaScript plugin with the SDK (rolldown) and turns it into a
// WebAssembly component (componentize-js) binding forewarn:plugin@0.3.0 (wit/, inside this
// package). The package's `forewarn-build-js PLUGIN.js -o OUT.wasm` (npx forewarn-build-js …);
// sdk/js/build.sh runs it in a checkout.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { componentize } from '@bytecodealliance/componentize-js';
import { decode } from '@jridgewell/sourcemap-codec';
import { rolldown } from 'rolldown';

const sdkDir = dirname(fileURLToPath(import.meta.url));
const witDir = join(sdkDir, 'wit');

// `PLUGIN.js -o OUT.wasm` (build.sh's form), or `PLUGIN.js OUT.wasm`.
function parseArgs(args) {
  const usage = 'usage: forewarn-build-js PLUGIN.js -o PLUGIN.wasm';
  if (args.includes('-h') || args.includes('--help')) {
    console.log(usage);
    process.exit(0);
  }
  const at = args.indexOf('-o');
  const output = at >= 0 ? args[at + 1] : args[1];
  const inputs = at >= 0 ? args.filter((_, i) => i !== at && i !== at + 1) : args.slice(0, 1);
  if (inputs.length !== 1 || !output) {
    console.error(usage);
    process.exit(2);
  }
  return [inputs[0], output];
}

const [plugin, output] = parseArgs(process.argv.slice(2));

// The component's entry module: the SDK turns the plugin's onEvent (and onStart, if it exports
// one) into the handler export.
const entrySource = (pluginPath) => `import { handler as makeHandler } from 'forewarn';
import * as plugin from ${JSON.stringify(pluginPath)};
export const handler = makeHandler(plugin.onEvent, plugin.onStart);
`;

/** A build that cannot make a working plugin: the message names the fix. */
class BuildError extends Error {}

/** The line table the SDK reads to place a thrown exception in the plugin's source: the
 * bundle's source map decoded, sources by file name. */
function sourceLines(map) {
  const sources = map.sources.map((source) => basename(source));
  return `\nglobalThis.__forewarnSourceLines = ${JSON.stringify({ sources, lines: decode(map.mappings) })};\n`;
}

async function bundle(pluginPath, work) {
  const entry = join(work, 'entry.js');
  await writeFile(entry, entrySource(resolve(pluginPath)));
  let missingOnEvent = false;
  const build = await rolldown({
    input: entry,
    external: [/^forewarn:plugin\//, /^wasi:/],
    resolve: { alias: { forewarn: join(sdkDir, 'forewarn.js') } },
    logLevel: 'warn',
    onLog(level, log, defaultHandler) {
      // A plugin without onStart is fine: the SDK's default on-start does nothing.
      if (log.code === 'IMPORT_IS_UNDEFINED' && log.message.includes('`onStart`')) {
        return;
      }
      if (log.code === 'IMPORT_IS_UNDEFINED' && log.message.includes('`onEvent`')) {
        missingOnEvent = true;
        return;
      }
      defaultHandler(level, log);
    },
  });
  const file = join(work, 'plugin.bundle.js');
  const { output } = await build.generate({ format: 'esm', sourcemap: true });
  await build.close();
  if (missingOnEvent) {
    throw new BuildError(
      `${basename(pluginPath)} exports no onEvent function, so the plugin would have nothing to ` +
        'answer events with: add `export function onEvent(event, phase, ctx)` returning ' +
        "approve() or defer(reason) from 'forewarn'",
    );
  }
  const [chunk] = output;
  await writeFile(file, chunk.code + sourceLines(chunk.map));
  return file;
}

async function main() {
  const work = await mkdtemp(join(tmpdir(), 'forewarn-js-'));
  try {
    const sourcePath = await bundle(plugin, work);
    const { component } = await componentize({
      sourcePath,
      witPath: witDir,
      worldName: 'event-handler',
      // wasi:http is not offered to plugins; stdio, clocks and random stay (sandboxed).
      disableFeatures: ['http', 'fetch-event'],
    });
    await writeFile(output, component);
    console.log(`built ${output} (${component.length} bytes)`);
  } catch (error) {
    if (!(error instanceof BuildError)) {
      throw error;
    }
    console.error(`error: ${error.message}`);
    process.exitCode = 1;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();

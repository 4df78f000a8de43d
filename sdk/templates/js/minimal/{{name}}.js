// {{name}}.js — a forewarn plugin written in JavaScript.
//
// forewarn calls onEvent() for every change in the life of each Azure Scheduled Event this
// plugin subscribes to (see {{name}}.toml), and onStart() once when it loads the plugin.
// Build: npm run build   Test: npm test   SDK reference: {{sdk_docs}}
import { approve, config, log } from 'forewarn';

// The config key this plugin reads from [config] in {{name}}.toml, and its default.
export const GREETING_KEY = 'greeting';
export const GREETING_DEFAULT = 'hello from {{name}}';

// Once per daemon run, before any onEvent: restore what an earlier VM saved elsewhere when
// ctx.firstRun is true (e.g. a Spot VM re-created after an eviction). Keep it short.
export function onStart(ctx) {
  log.info(`{{name}} loaded on ${ctx.vmName} (first run: ${ctx.firstRun})`);
}

// Answer approve() when this VM is ready for the maintenance, or defer(reason, retryAfterMs)
// to be asked again. Only the answer to 'prepare' counts. Phases are strings; u64 fields of
// the event and context (notBeforeUnixMs, deadlineUnixMs, …) are BigInts.
export function onEvent(event, phase, ctx) {
  if (!ctx.affectsThisVm) {
    // The event is for another VM of the same availability set or scale set.
    return approve();
  }
  switch (phase) {
    case 'prepare': {
      // The event was scheduled (or rescheduled): prepare the workload, then approve.
      // Not finished yet? `return defer('waiting for ...', 5000)` (import defer from 'forewarn')
      // and forewarn asks again in 5 s.
      const greeting = config(GREETING_KEY, GREETING_DEFAULT);
      log.info(`${greeting}: ${event.eventTypeRaw} ${event.id} is scheduled; approving`);
      return approve();
    }
    case 'started':
      // The maintenance is under way. Informational: the answer is not used.
      log.info(`${event.eventTypeRaw} ${event.id} started`);
      break;
    case 'ended-after-start':
      // The maintenance is over: recover (rejoin the pool, restart what you stopped).
      log.info(`${event.eventTypeRaw} ${event.id} is over`);
      break;
    case 'ended-without-start':
      // Azure canceled the event: undo what 'prepare' did.
      log.info(`${event.eventTypeRaw} ${event.id} was canceled`);
      break;
  }
  return approve();
}

// counter.js — a forewarn plugin in JavaScript: counts the events it has been asked to
// prepare for in durable state (it survives reloads and restarts), logs the count, approves.
import { approve, log, state } from 'forewarn';

const KEY = 'prepared-events';

export function onEvent(event, phase, ctx) {
  if (phase !== 'prepare') {
    return approve();
  }
  const count = Number(state.getText(KEY) ?? '0') + 1;
  state.set(KEY, String(count));
  log.info(`prepare #${count}: ${event.eventTypeRaw} ${event.id} (attempt ${ctx.attempt})`);
  return approve();
}

// counter.js — a forewarn plugin in JavaScript: counts the events it has been asked to
// prepare for in durable state (it survives reloads and restarts), logs the count, approves.
// On start it logs what it knows of the VM (onStart is optional: the SDK's default does nothing).
import { approve, evictionDeletesDisks, log, state } from 'forewarn';

export function onStart(ctx) {
  const policy = ctx.vm.evictionPolicy ?? 'none';
  log.info(
    `started on ${ctx.vmName}: priority ${ctx.vm.priority}, eviction policy ${policy}, ` +
      `first run ${ctx.firstRun ? 'yes' : 'no'}`,
  );
}

const KEY = 'prepared-events';

export function onEvent(event, phase, ctx) {
  if (phase !== 'prepare') {
    return approve();
  }
  const count = Number(state.getText(KEY) ?? '0') + 1;
  state.set(KEY, String(count));
  if (evictionDeletesDisks(ctx.vm)) {
    log.info(`this VM's disks do not survive an eviction: ${event.id}`);
  }
  log.info(`prepare #${count}: ${event.eventTypeRaw} ${event.id} (attempt ${ctx.attempt})`);
  return approve();
}

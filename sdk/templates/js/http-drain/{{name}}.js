// {{name}}.js — a forewarn plugin written in JavaScript that drains this VM before maintenance.
//
// On 'prepare' it takes the VM out of rotation (the daemon's /readyz answers 503, so the load
// balancer probing it stops sending traffic), POSTs the event to a local service's drain URL
// ([config] drain-url in {{name}}.toml) and approves once the service answered 2xx; otherwise it
// defers and forewarn asks again. When the event is over it puts the VM back in rotation.
// Build: npm run build   Test: npm test   SDK reference: {{sdk_docs}}
import { approve, config, defer, http, log, setReady } from 'forewarn';

// The config key naming the service's drain endpoint, and the URL used without it. Its
// host:port must be granted in [capabilities] http of {{name}}.toml.
export const DRAIN_URL_KEY = 'drain-url';
export const DRAIN_URL_DEFAULT = 'http://127.0.0.1:8080/drain';

// How long forewarn waits before asking again when a step failed, in milliseconds.
const RETRY_MS = 5000;

// Only the answer to 'prepare' counts; the other phases return approve(). Phases are strings.
export function onEvent(event, phase, ctx) {
  if (!ctx.affectsThisVm) {
    // The event is for another VM of the same availability set or scale set: nothing to
    // drain here, and nothing to put back.
    return approve();
  }
  switch (phase) {
    case 'prepare':
      // The event was scheduled (or rescheduled).
      return drain(event);
    case 'started':
      // The maintenance is under way: the VM stays out of rotation. Informational.
      log.info(`${event.eventTypeRaw} ${event.id} started`);
      break;
    case 'ended-after-start': // the maintenance is over
    case 'ended-without-start': // Azure canceled the event
      backInRotation(event);
      break;
  }
  return approve();
}

// Out of rotation, then the POST; approves on a 2xx answer, else defers with the reason (the
// VM stays out of rotation meanwhile). The service is told again at every attempt: make its
// drain idempotent.
function drain(event) {
  try {
    // /readyz answers 503 from now on, until setReady(true).
    setReady(false);
  } catch (error) {
    return defer(`cannot take the VM out of rotation: ${why(error)}`, RETRY_MS);
  }
  const url = config(DRAIN_URL_KEY, DRAIN_URL_DEFAULT);
  const notice = JSON.stringify({ event_id: event.id, event_type: event.eventType });
  let response;
  try {
    response = http.post(url, notice);
  } catch (error) {
    // Not granted, refused, timed out: the error says which, and what to do about it.
    return defer(`the drain at ${url}: ${why(error)}`, RETRY_MS);
  }
  if (!response.ok) {
    return defer(`the drain at ${url} answered ${response.status}`, RETRY_MS);
  }
  log.info(`out of rotation, and ${url} answered ${response.status}: ready for ${event.eventTypeRaw} ${event.id}`);
  return approve();
}

// Puts the VM back in rotation. With several events in flight at once this releases the VM
// at the first one's end: the bundled lb-drain plugin keeps the set of events it drained for.
function backInRotation(event) {
  try {
    setReady(true);
  } catch (error) {
    log.error(`cannot put the VM back in rotation: ${why(error)}`);
    return;
  }
  log.info(`${event.eventTypeRaw} ${event.id} is over: back in rotation`);
}

// A host error (a HostError: kind 'not-granted', 'failed', …, and its detail) for a reason.
function why(error) {
  if (error?.kind === undefined) return String(error);
  return error.detail ? `${error.kind}: ${error.detail}` : error.kind;
}

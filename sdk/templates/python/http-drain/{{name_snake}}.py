"""{{name}} — a forewarn plugin written in Python that drains this VM before maintenance.

On PREPARE it takes the VM out of rotation (the daemon's /readyz answers 503, so the load
balancer probing it stops sending traffic), POSTs the event to a local service's drain URL
([config] drain-url in {{name}}.toml) and approves once the service answered 2xx; otherwise it
defers and forewarn asks again. When the event is over it puts the VM back in rotation.
Build: ./build.sh   Test: ./test.sh   SDK reference: {{sdk_docs}}
"""

import json

from forewarn import (Context, Event, HostError, Phase, approve, config, defer, http, log,
                      set_ready)

# The config key naming the service's drain endpoint, and the URL used without it. Its
# host:port must be granted in [capabilities] http of {{name}}.toml.
DRAIN_URL_KEY = "drain-url"
DRAIN_URL_DEFAULT = "http://127.0.0.1:8080/drain"

# How long forewarn waits before asking again when a step failed, in milliseconds.
RETRY_MS = 5_000


def on_event(event: Event, phase: Phase, ctx: Context):
    """Only the answer to PREPARE counts; the other phases return approve()."""
    if not ctx.affects_this_vm:
        # The event is for another VM of the same availability set or scale set: nothing to
        # drain here, and nothing to put back.
        return approve()
    if phase == Phase.PREPARE:
        # The event was scheduled (or rescheduled).
        return drain(event)
    if phase == Phase.STARTED:
        # The maintenance is under way: the VM stays out of rotation. Informational.
        log.info(f"{event.event_type_raw} {event.id} started")
    elif phase in (Phase.ENDED_AFTER_START, Phase.ENDED_WITHOUT_START):
        # The maintenance is over, or Azure canceled the event.
        back_in_rotation(event)
    return approve()


def drain(event: Event):
    """Out of rotation, then the POST; approves on a 2xx answer, else defers with the reason
    (the VM stays out of rotation meanwhile). The service is told again at every attempt:
    make its drain idempotent."""
    try:
        # /readyz answers 503 from now on, until set_ready(True).
        set_ready(False)
    except HostError as error:
        return defer(f"cannot take the VM out of rotation: {why(error)}", RETRY_MS)
    url = config(DRAIN_URL_KEY, DRAIN_URL_DEFAULT)
    notice = json.dumps({"event_id": event.id, "event_type": event.event_type.name.lower()})
    try:
        response = http.post(url, notice)
    except HostError as error:
        # Not granted, refused, timed out: the error says which, and what to do about it.
        return defer(f"the drain at {url}: {why(error)}", RETRY_MS)
    if not response.ok:
        return defer(f"the drain at {url} answered {response.status}", RETRY_MS)
    log.info(f"out of rotation, and {url} answered {response.status}: ready for "
             f"{event.event_type_raw} {event.id}")
    return approve()


def back_in_rotation(event: Event) -> None:
    """Puts the VM back in rotation. With several events in flight at once this releases the
    VM at the first one's end: the bundled lb-drain plugin keeps the set of events it drained
    for."""
    try:
        set_ready(True)
    except HostError as error:
        log.error(f"cannot put the VM back in rotation: {why(error)}")
        return
    log.info(f"{event.event_type_raw} {event.id} is over: back in rotation")


def why(error: HostError) -> str:
    """A host error for a reason: its kind ("not-granted", "failed", …) and its detail."""
    return f"{error.kind}: {error.detail}" if error.detail else error.kind

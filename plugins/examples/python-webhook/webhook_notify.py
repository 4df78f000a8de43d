"""webhook_notify — a forewarn plugin in Python: posts a notification about each
scheduled maintenance to a webhook (``webhook-url`` in the manifest's [config]; its
host:port must be on ``[capabilities] http``) and approves."""

import json

from forewarn import Phase, approve, config, defer, http, log, HostError


def on_event(event, phase, ctx):
    if phase != Phase.PREPARE:
        return approve()
    url = config("webhook-url")
    if url is None:
        log.warn("no webhook-url in the manifest's [config]: not notifying")
        return approve()
    notice = {
        "event": event.id,
        "type": event.event_type_raw,
        "vm": ctx.vm_name,
        "affects-this-vm": ctx.affects_this_vm,
        "not-before-unix-ms": event.not_before_unix_ms,
        "description": event.description,
    }
    try:
        response = http.post(url, json.dumps(notice))
    except HostError as error:
        return defer(f"webhook not reached: {error}", retry_after_ms=2_000)
    if not response.ok:
        return defer(f"webhook answered {response.status}", retry_after_ms=2_000)
    log.info(f"notified {url} of {event.event_type_raw} {event.id}")
    return approve()

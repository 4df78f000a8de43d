"""webhook_notify — a forewarn plugin in Python: posts a notification about each
scheduled maintenance to a webhook (``webhook-url`` in the manifest's [config]; its
host:port must be on ``[capabilities] http``) and approves. With ``webhook-token-resource``
in [config] (and that resource on ``[capabilities] azure-identity``) the request carries a
bearer token of the VM's managed identity. On start it logs what it knows of
the VM (``on_start`` is optional: the SDK's default does nothing)."""

import json

from forewarn import Phase, approve, config, defer, http, identity, log, HostError


def on_start(ctx):
    policy = ctx.vm.eviction_policy.name.lower() if ctx.vm.eviction_policy else "none"
    log.info(f"started on {ctx.vm_name}: priority {ctx.vm.priority.name.lower()}, "
             f"eviction policy {policy}, first run {'yes' if ctx.first_run else 'no'}")


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
        "until-not-before-ms": ctx.until_not_before_ms,
        "evictable": ctx.vm.is_evictable(),
        "eviction-deletes-disks": ctx.vm.eviction_deletes_disks(),
        "description": event.description,
    }
    headers = [("content-type", "application/json")]
    resource = config("webhook-token-resource")
    try:
        if resource is not None:
            headers.append(("authorization", identity.access_token(resource).bearer()))
        response = http.send("POST", url, json.dumps(notice).encode("utf-8"), headers)
    except HostError as error:
        return defer(f"webhook not reached: {error}", retry_after_ms=2_000)
    if not response.ok:
        return defer(f"webhook answered {response.status}", retry_after_ms=2_000)
    log.info(f"notified {url} of {event.event_type_raw} {event.id}")
    return approve()

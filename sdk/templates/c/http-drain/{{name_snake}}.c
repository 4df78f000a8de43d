/* {{name_snake}}.c — {{name}}, a forewarn plugin written in C that drains this VM before
 * maintenance.
 *
 * On FW_PREPARE it takes the VM out of rotation (the daemon's /readyz answers 503, so the load
 * balancer probing it stops sending traffic), POSTs the event to a local service's drain URL
 * ([config] drain-url in {{name}}.toml) and approves once the service answered 2xx; otherwise it
 * defers and forewarn asks again. When the event is over it puts the VM back in rotation.
 * Build: make   Test: make test   SDK reference: {{sdk_docs}}
 * Strings the SDK returns (fw_config, fw_string, ...) are malloc'd: free() them.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "forewarn.h"

/* The config key naming the service's drain endpoint, and the URL used without it. Its
 * host:port must be granted in [capabilities] http of {{name}}.toml. */
#define DRAIN_URL_KEY "drain-url"
#define DRAIN_URL_DEFAULT "http://127.0.0.1:8080/drain"

/* How long forewarn waits before asking again when a step failed, in milliseconds. */
#define RETRY_MS 5000

/* Out of rotation, then the POST; approves on a 2xx answer, else defers with the reason (the
 * VM stays out of rotation meanwhile). The service is told again at every attempt: make its
 * drain idempotent. */
static fw_decision drain(const fw_event *event) {
    /* /readyz answers 503 from now on, until fw_set_ready(true). A failure (readiness not
     * granted) is logged as a warning by the SDK. */
    if (!fw_set_ready(false)) {
        return fw_defer(RETRY_MS, "cannot take the VM out of rotation (the set-ready warning says why)");
    }
    char *configured = fw_config(DRAIN_URL_KEY);
    const char *url = configured ? configured : DRAIN_URL_DEFAULT;
    /* {"event_id":"...","event_type":"reboot"} */
    char type[16] = {0};
    const char *name = fw_event_type_name((fw_event_type)event->event_type);
    for (size_t i = 0; name[i] != '\0' && i + 1 < sizeof type; i++) type[i] = (char)tolower((unsigned char)name[i]);
    char body[512];
    int len = snprintf(body, sizeof body, "{\"event_id\":\"%.*s\",\"event_type\":\"%s\"}", (int)event->id.len,
                       (const char *)event->id.ptr, type);
    size_t body_len = len < 0 ? 0 : ((size_t)len < sizeof body ? (size_t)len : sizeof body - 1);
    int status = fw_http_post(url, "application/json", body, body_len);
    fw_decision decision;
    if (status >= 200 && status < 300) {
        fw_info("out of rotation, and %s answered %d: ready for %s %.*s", url, status, type, (int)event->id.len,
                (const char *)event->id.ptr);
        decision = fw_approve();
    } else if (status < 0) {
        /* Not granted, refused, timed out: the SDK logged the http-send warning with the cause. */
        decision = fw_defer(RETRY_MS, "the drain at %s did not answer (the http-send warning says why)", url);
    } else {
        decision = fw_defer(RETRY_MS, "the drain at %s answered %d", url, status);
    }
    free(configured);
    return decision;
}

/* Puts the VM back in rotation. With several events in flight at once this releases the VM at
 * the first one's end: the bundled lb-drain plugin keeps the set of events it drained for. */
static void back_in_rotation(const fw_event *event) {
    if (fw_set_ready(true)) {
        fw_info("%.*s %.*s is over: back in rotation", (int)event->event_type_raw.len,
                (const char *)event->event_type_raw.ptr, (int)event->id.len, (const char *)event->id.ptr);
    } else {
        fw_error("cannot put the VM back in rotation (the set-ready warning says why)");
    }
}

/* Only the answer to FW_PREPARE counts; the other phases return fw_approve(). */
fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx) {
    if (!ctx->affects_this_vm) {
        /* The event is for another VM of the same availability set or scale set: nothing to
         * drain here, and nothing to put back. */
        return fw_approve();
    }
    switch (phase) {
    case FW_PREPARE:
        /* The event was scheduled (or rescheduled). */
        return drain(event);
    case FW_STARTED:
        /* The maintenance is under way: the VM stays out of rotation. Informational. */
        fw_info("%.*s %.*s started", (int)event->event_type_raw.len, (const char *)event->event_type_raw.ptr,
                (int)event->id.len, (const char *)event->id.ptr);
        break;
    case FW_ENDED_AFTER_START:  /* the maintenance is over */
    case FW_ENDED_WITHOUT_START: /* Azure canceled the event */
        back_in_rotation(event);
        break;
    }
    return fw_approve();
}

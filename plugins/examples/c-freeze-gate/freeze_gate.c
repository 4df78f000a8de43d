/* freeze_gate.c — a forewarn plugin in C: approves a Freeze shorter than
 * `max-freeze-seconds` (manifest [config]) and defers anything longer or of unknown length. */
#include <stdlib.h>

#include "forewarn.h"

/* When the manifest does not say. */
#define DEFAULT_MAX_FREEZE_SECONDS 10
#define RETRY_AFTER_MS 60000

fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx) {
    if (phase != FW_PREPARE || !ctx->affects_this_vm) return fw_approve();
    if (event->event_type != FW_FREEZE) return fw_approve();

    long long max_seconds = fw_config_int("max-freeze-seconds", DEFAULT_MAX_FREEZE_SECONDS);
    if (!event->duration_seconds.is_some) {
        return fw_defer(RETRY_AFTER_MS, "Freeze %.*s of unknown length: limit is %llds",
                        (int)event->id.len, (const char *)event->id.ptr, max_seconds);
    }
    long long seconds = event->duration_seconds.val;
    if (seconds >= max_seconds) {
        return fw_defer(RETRY_AFTER_MS, "Freeze of %llds is not shorter than %llds", seconds,
                        max_seconds);
    }
    fw_info("approving a %llds Freeze (limit %llds)", seconds, max_seconds);
    return fw_approve();
}

/* freeze_gate.c — a forewarn plugin in C: approves a Freeze shorter than
 * `max-freeze-seconds` (manifest [config]) and defers anything longer or of unknown length.
 * On start it logs what it knows of the VM (fw_on_start is optional: the SDK's default does
 * nothing). */
#include <stdlib.h>

#include "forewarn.h"

/* When the manifest does not say. */
#define DEFAULT_MAX_FREEZE_SECONDS 10
#define RETRY_AFTER_MS 60000

void fw_on_start(const fw_start_context *ctx) {
    const char *policy = ctx->vm.eviction_policy.is_some
                             ? fw_eviction_policy_name(ctx->vm.eviction_policy.val)
                             : "none";
    fw_info("started on %.*s: priority %s, eviction policy %s, first run %s",
            (int)ctx->vm_name.len, (const char *)ctx->vm_name.ptr,
            fw_vm_priority_name(ctx->vm.priority), policy, ctx->first_run ? "yes" : "no");
}

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

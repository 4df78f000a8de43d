/* {{name_snake}}.c — {{name}}, a forewarn plugin written in C.
 *
 * forewarn calls fw_on_event() for every change in the life of each Azure Scheduled Event this
 * plugin subscribes to (see {{name}}.toml), and fw_on_start() once when it loads the plugin.
 * Build: make   Test: make test   SDK reference: {{sdk_docs}}
 * Strings the SDK returns (fw_config, fw_string, ...) are malloc'd: free() them.
 */
#include <stdlib.h>

#include "forewarn.h"

/* The config key this plugin reads from [config] in {{name}}.toml, and its default. */
#define GREETING_KEY "greeting"
#define GREETING_DEFAULT "hello from {{name}}"

/* Once per daemon run, before any fw_on_event: restore what an earlier VM saved elsewhere when
 * ctx->first_run is true (e.g. a Spot VM re-created after an eviction). Keep it short. */
void fw_on_start(const fw_start_context *ctx) {
    fw_info("{{name}} loaded on %.*s (first run: %s)", (int)ctx->vm_name.len, (const char *)ctx->vm_name.ptr,
            ctx->first_run ? "yes" : "no");
}

/* Answer fw_approve() when this VM is ready for the maintenance, or
 * fw_defer(retry_after_ms, "reason") to be asked again. Only the answer to FW_PREPARE counts. */
fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx) {
    if (!ctx->affects_this_vm) {
        /* The event is for another VM of the same availability set or scale set. */
        return fw_approve();
    }
    int type_len = (int)event->event_type_raw.len, id_len = (int)event->id.len;
    const char *type = (const char *)event->event_type_raw.ptr, *id = (const char *)event->id.ptr;
    switch (phase) {
    case FW_PREPARE: {
        /* The event was scheduled (or rescheduled): prepare the workload, then approve.
         * Not finished yet? `return fw_defer(5000, "waiting for %s", what);` and forewarn
         * asks again in 5 s. */
        char *greeting = fw_config(GREETING_KEY);
        fw_info("%s: %.*s %.*s is scheduled; approving", greeting ? greeting : GREETING_DEFAULT, type_len, type,
                id_len, id);
        free(greeting);
        return fw_approve();
    }
    case FW_STARTED:
        /* The maintenance is under way. Informational: the answer is not used. */
        fw_info("%.*s %.*s started", type_len, type, id_len, id);
        break;
    case FW_ENDED_AFTER_START:
        /* The maintenance is over: recover (rejoin the pool, restart what you stopped). */
        fw_info("%.*s %.*s is over", type_len, type, id_len, id);
        break;
    case FW_ENDED_WITHOUT_START:
        /* Azure canceled the event: undo what FW_PREPARE did. */
        fw_info("%.*s %.*s was canceled", type_len, type, id_len, id);
        break;
    }
    return fw_approve();
}

/* drain.c — a plugin using every host call the C SDK wraps, for test_testing.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forewarn.h"

#define HOOK "http://hooks.internal:8080/events"

void fw_on_start(const fw_start_context *ctx) {
    if (ctx->first_run) fw_state_set("restored", "yes", 3);
}

fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx) {
    if (phase != FW_PREPARE) {
        fw_state_delete("drained");
        return fw_approve();
    }
    fw_info("%.*s", (int)event->id.len, (const char *)event->id.ptr);
    long long retry = fw_config_int("retry-ms", 5000);
    char *url = fw_config("url");
    int status = fw_http_post(url ? url : HOOK, "application/json", "{\"drain\": true}", 15);
    free(url);
    if (status < 200 || status > 299) return fw_defer((uint32_t)retry, "hook answered %d", status);
    char *token = fw_azure_access_token(FW_AZURE_STORAGE, NULL);
    if (token == NULL) return fw_defer((uint32_t)retry, "no token");
    free(token);
    if (!fw_set_ready(false)) return fw_defer((uint32_t)retry, "readiness refused");
    size_t len = 0;
    char *count = fw_state_get("count", &len);
    char next[32];
    int written = snprintf(next, sizeof next, "%lld", (count ? atoll(count) : 0) + 1);
    free(count);
    fw_state_set("count", next, (size_t)written);
    return fw_approve();
}

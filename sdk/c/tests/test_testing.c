/* test_testing.c — tests of testing.c, the C SDK's native stub host (run: sdk/c/test.sh
 * tests/drain.c tests/test_testing.c, from sdk/c). */
#include <string.h>

#include "testing.h"

#define HOOK "http://hooks.internal:8080/events"

static void full_host(void) {
    fw_test_reset("drain");
    fw_test_config("retry-ms", "7000");
    fw_test_http_reply("POST", HOOK, 204, "");
    fw_test_access_token(FW_AZURE_STORAGE, "tok-1");
    fw_test_grant_readiness(true);
    fw_test_state("count", "41", 2);
}

static fw_decision prepare(void) {
    fw_event event = fw_test_event(FW_REBOOT);
    fw_context ctx = fw_test_context();
    return fw_on_event(&event, FW_PREPARE, &ctx);
}

static void approves_and_records_every_call_in_order(void) {
    full_host();
    fw_decision decision = prepare();
    FW_EXPECT(fw_test_is_approve(&decision));
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_effects() == 3);
    const fw_test_call *post = fw_test_find("http-send", 0);
    FW_EXPECT(post != NULL && strcmp(post->method, "POST") == 0 && strcmp(post->arg, HOOK) == 0);
    FW_EXPECT(post != NULL && post->body_len == 15 && memcmp(post->body, "{\"drain\": true}", 15) == 0);
    FW_EXPECT(fw_test_count("azure-access-token") == 1);
    FW_EXPECT(strcmp(fw_test_find("azure-access-token", 0)->arg, FW_AZURE_STORAGE) == 0);
    FW_EXPECT(fw_test_ready() == 0);
    FW_EXPECT(fw_test_count("state-set") == 1 && strcmp(fw_test_state_text("count"), "42") == 0);
    FW_EXPECT(fw_test_count("log") == 1 && strcmp(fw_test_find("log", 0)->method, "info") == 0);
    /* In order: the first call logs, the last writes the state. */
    FW_EXPECT(strcmp(fw_test_call_at(0)->name, "log") == 0);
    FW_EXPECT(strcmp(fw_test_call_at(fw_test_calls() - 1)->name, "state-set") == 0);
}

static void a_stubbed_failure_reaches_the_plugin(void) {
    full_host();
    fw_test_http_reply("post", HOOK, 503, "busy");
    fw_decision decision = prepare();
    FW_EXPECT(!fw_test_is_approve(&decision));
    FW_EXPECT(strcmp(fw_test_defer_reason(&decision), "hook answered 503") == 0);
    FW_EXPECT(decision.val.defer.retry_after_ms == 7000);
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_count("azure-access-token") == 0);

    full_host();
    fw_test_http_error("POST", HOOK, FW_TEST_TIMED_OUT, NULL);
    decision = prepare();
    FW_EXPECT(strcmp(fw_test_defer_reason(&decision), "hook answered -1") == 0);
    fw_test_decision_free(&decision);

    full_host();
    fw_test_access_token_error(FW_AZURE_STORAGE, FW_TEST_FAILED, "imds down");
    decision = prepare();
    FW_EXPECT(strcmp(fw_test_defer_reason(&decision), "no token") == 0);
    fw_test_decision_free(&decision);
}

static void ungranted_calls_are_refused_naming_the_manifest_line(void) {
    fw_test_reset("drain");
    fw_decision decision = prepare();
    FW_EXPECT(strcmp(fw_test_defer_reason(&decision), "hook answered -1") == 0);
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_count("http-send") == 1);
    /* The SDK logs the refusal as a warning: the detail names the line to add. */
    const fw_test_call *warning = fw_test_find("log", 1);
    FW_EXPECT(warning != NULL && strcmp(warning->method, "warn") == 0);
    FW_EXPECT(warning != NULL && strstr(warning->arg, "\"hooks.internal:8080\" to [capabilities] http in drain.toml"));

    fw_test_reset("drain");
    fw_test_http_reply("POST", HOOK, 200, "");
    fw_test_access_token(FW_AZURE_STORAGE, "t");
    decision = prepare();
    FW_EXPECT(strcmp(fw_test_defer_reason(&decision), "readiness refused") == 0);
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_ready() == -1);
}

static void invalid_urls_are_invalid(void) {
    fw_test_reset("drain");
    fw_test_config("url", "hooks/x");
    fw_decision decision = prepare();
    fw_test_decision_free(&decision);
    const fw_test_call *warning = fw_test_find("log", 1);
    FW_EXPECT(warning != NULL && strstr(warning->arg, "invalid") && strstr(warning->arg, "not an absolute URL"));
}

static void state_carries_over_and_on_start_runs(void) {
    full_host();
    fw_start_context start = fw_test_start_context();
    start.first_run = true;
    fw_on_start(&start);
    FW_EXPECT(fw_test_state_text("restored") != NULL);
    fw_decision decision = prepare();
    fw_test_decision_free(&decision);
    decision = prepare();
    fw_test_decision_free(&decision);
    FW_EXPECT(strcmp(fw_test_state_text("count"), "43") == 0);
    fw_test_state("drained", "1", 1);
    fw_event event = fw_test_event(FW_REBOOT);
    fw_context ctx = fw_test_context();
    decision = fw_on_event(&event, FW_ENDED_AFTER_START, &ctx);
    FW_EXPECT(fw_test_is_approve(&decision));
    FW_EXPECT(fw_test_state_text("drained") == NULL && fw_test_count("state-delete") == 1);
}

static void inputs_have_defaults(void) {
    fw_event event = fw_test_event(FW_PREEMPT);
    fw_context ctx = fw_test_context();
    FW_EXPECT(fw_str_eq(event.event_type_raw, "Preempt") && fw_str_eq(event.id, FW_TEST_EVENT_ID));
    FW_EXPECT(event.resources.len == 1 && fw_str_eq(event.resources.ptr[0], FW_TEST_VM_NAME));
    FW_EXPECT(ctx.affects_this_vm && ctx.attempt == 1 && !fw_vm_is_evictable(&ctx.vm));
}

static void drain_progress_answers_what_the_test_stubbed(void) {
    fw_test_reset("drain");
    fw_drain_status_t progress;
    FW_EXPECT(!fw_drain_progress(3, &progress)); /* readiness not granted */
    fw_test_grant_readiness(true);
    FW_EXPECT(fw_drain_progress(3, &progress));
    FW_EXPECT(progress.probers == 0 && progress.drained_for_ms == -1 && progress.not_ready_for_ms == -1);
    fw_test_drain_progress(2, 2, 1500, 4000);
    FW_EXPECT(fw_drain_progress(3, &progress));
    FW_EXPECT(progress.probers == 2 && progress.probers_drained == 2);
    FW_EXPECT(progress.drained_for_ms == 1500 && progress.not_ready_for_ms == 4000);
    FW_EXPECT(!fw_drain_progress(17, &progress)); /* out of range */
    FW_EXPECT(fw_test_count("drain-progress") == 4);
}

int main(void) {
    approves_and_records_every_call_in_order();
    a_stubbed_failure_reaches_the_plugin();
    ungranted_calls_are_refused_naming_the_manifest_line();
    invalid_urls_are_invalid();
    state_carries_over_and_on_start_runs();
    inputs_have_defaults();
    drain_progress_answers_what_the_test_stubbed();
    fw_test_reset(NULL);
    return fw_test_finish();
}

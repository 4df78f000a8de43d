/* test_{{name_snake}}.c — native tests of {{name}} (make test): the SDK's stub host (the SDK's
 * testing.h) stands in for the daemon (the readiness grant, the drain service's answers) and
 * records every host call the plugin makes. */
#include <string.h>

#include "testing.h"

#define DRAIN_URL "http://127.0.0.1:9000/drain"

/* A host that grants readiness and has drain-url configured. */
static void reset(void) {
    fw_test_reset("{{name}}");
    fw_test_grant_readiness(true);
    fw_test_config("drain-url", DRAIN_URL);
}

static fw_decision prepare(fw_event_type type) {
    fw_event event = fw_test_event(type);
    fw_context ctx = fw_test_context();
    return fw_on_event(&event, FW_PREPARE, &ctx);
}

static void prepare_takes_the_vm_out_of_rotation_posts_to_the_drain_url_and_approves(void) {
    reset();
    fw_test_http_reply("POST", DRAIN_URL, 200, "");
    fw_decision decision = prepare(FW_REBOOT);
    FW_EXPECT(fw_test_is_approve(&decision));
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_ready() == 0); /* out of rotation */
    FW_EXPECT(fw_test_count("http-send") == 1);
    const fw_test_call *sent = fw_test_find("http-send", 0);
    FW_EXPECT(strcmp(sent->method, "POST") == 0 && strcmp(sent->arg, DRAIN_URL) == 0);
    FW_EXPECT(strcmp((const char *)sent->body, "{\"event_id\":\"" FW_TEST_EVENT_ID "\",\"event_type\":\"reboot\"}") == 0);
    /* Out of rotation first, then the service is told. */
    FW_EXPECT(strcmp(fw_test_call_at(0)->name, "set-ready") == 0 && !fw_test_call_at(0)->ready);
}

static void an_error_answer_defers_and_keeps_the_vm_out_of_rotation(void) {
    reset();
    fw_test_http_reply("POST", DRAIN_URL, 503, "busy");
    fw_decision decision = prepare(FW_REDEPLOY);
    FW_EXPECT(strcmp(fw_test_defer_reason(&decision), "the drain at " DRAIN_URL " answered 503") == 0);
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_ready() == 0);
}

static void an_unreachable_service_defers_with_the_reason(void) {
    reset();
    fw_test_http_error("POST", DRAIN_URL, FW_TEST_FAILED, "connection refused");
    fw_decision decision = prepare(FW_REBOOT);
    FW_EXPECT(strstr(fw_test_defer_reason(&decision), "the drain at " DRAIN_URL " did not answer") != NULL);
    fw_test_decision_free(&decision);
    /* The SDK logged the cause as a warning. */
    int warned = 0;
    for (size_t i = 0; i < fw_test_count("log"); i++)
        warned |= strstr(fw_test_find("log", i)->arg, "connection refused") != NULL;
    FW_EXPECT(warned);
}

static void without_the_readiness_grant_it_defers_before_telling_the_service(void) {
    fw_test_reset("{{name}}");
    fw_test_http_reply("POST", "http://127.0.0.1:8080/drain", 200, "");
    fw_decision decision = prepare(FW_REBOOT);
    FW_EXPECT(strstr(fw_test_defer_reason(&decision), "cannot take the VM out of rotation") != NULL);
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_count("http-send") == 0);
}

static void the_end_of_the_event_puts_the_vm_back_in_rotation(void) {
    const fw_phase ends[] = {FW_ENDED_AFTER_START, FW_ENDED_WITHOUT_START};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        reset();
        fw_test_http_reply("POST", DRAIN_URL, 204, "");
        fw_event event = fw_test_event(FW_REBOOT);
        fw_context ctx = fw_test_context();
        fw_decision decision = fw_on_event(&event, FW_PREPARE, &ctx);
        fw_test_decision_free(&decision);
        FW_EXPECT(fw_test_ready() == 0);
        decision = fw_on_event(&event, ends[i], &ctx);
        FW_EXPECT(fw_test_is_approve(&decision));
        fw_test_decision_free(&decision);
        FW_EXPECT(fw_test_ready() == 1); /* back in rotation */
    }
}

static void events_for_other_vms_change_nothing(void) {
    reset();
    fw_event event = fw_test_event(FW_REBOOT);
    fw_context ctx = fw_test_context();
    ctx.affects_this_vm = false;
    const fw_phase phases[] = {FW_PREPARE, FW_ENDED_AFTER_START};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        fw_decision decision = fw_on_event(&event, phases[i], &ctx);
        FW_EXPECT(fw_test_is_approve(&decision));
        fw_test_decision_free(&decision);
    }
    FW_EXPECT(fw_test_effects() == 0);
}

int main(void) {
    prepare_takes_the_vm_out_of_rotation_posts_to_the_drain_url_and_approves();
    an_error_answer_defers_and_keeps_the_vm_out_of_rotation();
    an_unreachable_service_defers_with_the_reason();
    without_the_readiness_grant_it_defers_before_telling_the_service();
    the_end_of_the_event_puts_the_vm_back_in_rotation();
    events_for_other_vms_change_nothing();
    return fw_test_finish();
}

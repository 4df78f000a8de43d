/* test_{{name_snake}}.c — native tests of {{name}} (make test): the SDK's stub host
 * (the SDK's testing.h) stands in for the daemon and records every host call the plugin makes. */
#include <string.h>

#include "testing.h"

static void prepare_reads_the_greeting_and_approves(void) {
    fw_test_reset("{{name}}");
    fw_test_config("greeting", "hi");
    fw_event event = fw_test_event(FW_REBOOT);
    fw_context ctx = fw_test_context();
    fw_decision decision = fw_on_event(&event, FW_PREPARE, &ctx);
    FW_EXPECT(fw_test_is_approve(&decision));
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_count("config") == 1 && strcmp(fw_test_find("config", 0)->arg, "greeting") == 0);
    FW_EXPECT(fw_test_count("log") == 1);
    FW_EXPECT(fw_test_effects() == 0); /* no state, HTTP, actions or readiness changes */
}

static void every_phase_is_answered(void) {
    const fw_phase phases[] = {FW_PREPARE, FW_STARTED, FW_ENDED_AFTER_START, FW_ENDED_WITHOUT_START};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        fw_test_reset("{{name}}");
        fw_event event = fw_test_event(FW_FREEZE);
        fw_context ctx = fw_test_context();
        fw_decision decision = fw_on_event(&event, phases[i], &ctx);
        FW_EXPECT(fw_test_is_approve(&decision));
        fw_test_decision_free(&decision);
    }
}

static void events_for_other_vms_are_approved_without_work(void) {
    fw_test_reset("{{name}}");
    fw_event event = fw_test_event(FW_REBOOT);
    fw_context ctx = fw_test_context();
    ctx.affects_this_vm = false;
    fw_decision decision = fw_on_event(&event, FW_PREPARE, &ctx);
    FW_EXPECT(fw_test_is_approve(&decision));
    fw_test_decision_free(&decision);
    FW_EXPECT(fw_test_calls() == 0);
}

static void on_start_makes_no_changes(void) {
    fw_test_reset("{{name}}");
    fw_start_context ctx = fw_test_start_context();
    fw_on_start(&ctx);
    FW_EXPECT(fw_test_effects() == 0);
}

int main(void) {
    prepare_reads_the_greeting_and_approves();
    every_phase_is_answered();
    events_for_other_vms_are_approved_without_work();
    on_start_makes_no_changes();
    return fw_test_finish();
}

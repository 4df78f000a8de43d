/* testing.h — native unit tests of C plugins, without the daemon (sdk/c/test.sh, `make test`).
 *
 * testing.c implements the host imports of wit/forewarn.wit natively: give it config values,
 * state, HTTP answers, action results, access tokens and the readiness grant; call the
 * plugin's fw_on_event() directly; then check the decision and the calls it recorded:
 *
 *     fw_test_reset("my-plugin");
 *     fw_test_config("url", "http://hooks:8080/x");
 *     fw_test_http_reply("POST", "http://hooks:8080/x", 204, "");
 *     fw_event event = fw_test_event(FW_REBOOT);
 *     fw_context ctx = fw_test_context();
 *     fw_decision decision = fw_on_event(&event, FW_PREPARE, &ctx);
 *     FW_EXPECT(fw_test_is_approve(&decision));
 *     FW_EXPECT(fw_test_count("http-send") == 1);
 *     FW_EXPECT(strcmp(fw_test_find("http-send", 0)->arg, "http://hooks:8080/x") == 0);
 *     fw_test_decision_free(&decision);
 *     return fw_test_finish();
 *
 * What was not given is answered as the daemon answers a plugin whose manifest grants nothing:
 * config and state-get find nothing; set-ready, http-send, run-action and azure-access-token
 * fail with not-granted and a text naming the manifest line to add; a URL that is not
 * absolute http(s) is invalid. Log lines are recorded and printed to stderr.
 */
#ifndef FOREWARN_TESTING_H
#define FOREWARN_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forewarn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The VM the test inputs describe; fw_test_event() lists it in resources. */
#define FW_TEST_VM_NAME "test-vm"
/* The id of fw_test_event(). */
#define FW_TEST_EVENT_ID "test-event-1"

/* Why a stubbed host call fails (the WIT host-error cases). */
typedef enum {
    FW_TEST_NOT_GRANTED = FOREWARN_PLUGIN_HOST_HOST_ERROR_NOT_GRANTED,
    FW_TEST_INVALID = FOREWARN_PLUGIN_HOST_HOST_ERROR_INVALID,
    FW_TEST_FAILED = FOREWARN_PLUGIN_HOST_HOST_ERROR_FAILED,
    FW_TEST_TIMED_OUT = FOREWARN_PLUGIN_HOST_HOST_ERROR_TIMED_OUT,
} fw_test_error;

/* ---- What the plugin will find (copied; call fw_test_reset() between tests) ---- */

/* Forgets config, state, stubs and recorded calls; `plugin` names the plugin in texts. */
void fw_test_reset(const char *plugin);
/* A value of the manifest's [config] table. */
void fw_test_config(const char *key, const char *value);
/* A value already in the plugin's durable state. */
void fw_test_state(const char *key, const void *value, size_t len);
/* Grants (or not) the readiness capability, so fw_set_ready() succeeds. */
void fw_test_grant_readiness(bool granted);
/* What fw_drain_progress() finds (needs fw_test_grant_readiness); -1 for "none" in the two
 * times. Without it, no load balancer probes /readyz (0 probers). */
void fw_test_drain_progress(uint32_t probers, uint32_t drained, int64_t drained_for_ms, int64_t not_ready_for_ms);
/* Answers requests of `method` to exactly `url` with `status` and `body` (a C string). */
void fw_test_http_reply(const char *method, const char *url, int status, const char *body);
/* Requests of `method` to `url` fail with `kind` (detail ignored for FW_TEST_TIMED_OUT). */
void fw_test_http_error(const char *method, const char *url, fw_test_error kind, const char *detail);
/* Grants action `name`: running it exits with `exit_code` (-1: killed) and prints `out`. */
void fw_test_action_result(const char *name, int exit_code, const char *out);
/* Running action `name` fails with `kind`. */
void fw_test_action_error(const char *name, fw_test_error kind, const char *detail);
/* Grants `resource` in azure-identity: asking for it returns `token`, valid for an hour. */
void fw_test_access_token(const char *resource, const char *token);
/* Asking for a token for `resource` fails with `kind`. */
void fw_test_access_token_error(const char *resource, fw_test_error kind, const char *detail);

/* ---- Inputs with sensible defaults (static strings; change any field) ---- */

/* A Scheduled Event of `type` for FW_TEST_VM_NAME, 15 minutes from now (30 s for Preempt). */
fw_event fw_test_event(fw_event_type type);
/* This VM (regular), first attempt, 15 minutes to NotBefore, 10 seconds to answer. */
fw_context fw_test_context(void);
/* What fw_on_start() is told: this VM, not a first run, 10 seconds to return. */
fw_start_context fw_test_start_context(void);

/* ---- The decision ---- */

bool fw_test_is_approve(const fw_decision *decision);
/* The reason of a deferral as a C string ("" for an approval); valid until the free. */
const char *fw_test_defer_reason(const fw_decision *decision);
/* Frees what fw_defer() allocated in the decision. */
void fw_test_decision_free(fw_decision *decision);

/* ---- What the plugin did ---- */

/* One host call. `name` is the WIT function: "log", "config", "state-get", "state-set",
 * "state-delete", "set-ready", "http-send", "run-action", "azure-access-token". */
typedef struct {
    const char *name;
    /* The key, URL, action name or resource; the message of a log line. */
    char *arg;
    /* http-send: the method; log: the level ("info", ...); else NULL. */
    char *method;
    /* state-set: the value; http-send: the body (NUL-terminated copies). */
    uint8_t *body;
    size_t body_len;
    /* set-ready: the value asked for. */
    bool ready;
} fw_test_call;

/* How many host calls were made in all. */
size_t fw_test_calls(void);
/* The i-th host call (0-based), or NULL. */
const fw_test_call *fw_test_call_at(size_t i);
/* How many calls of `name` were made. */
size_t fw_test_count(const char *name);
/* The nth (0-based) call of `name`, or NULL. */
const fw_test_call *fw_test_find(const char *name, size_t nth);
/* How many calls changed something: state-set, state-delete, set-ready, http-send, run-action. */
size_t fw_test_effects(void);
/* A state value as it stands (a NUL-terminated view), or NULL when absent. */
const char *fw_test_state_text(const char *key);
/* What the plugin last set with fw_set_ready(): 1 ready, 0 not ready, -1 never (or refused). */
int fw_test_ready(void);

/* ---- Checks ---- */

/* Checks a condition: on failure prints the file, line and condition, and counts it. */
#define FW_EXPECT(condition) \
    fw_test_expect((condition), #condition, __FILE__, __LINE__)
void fw_test_expect(bool ok, const char *condition, const char *file, int line);
/* Prints a summary; the exit code of the test program: 0 when every check passed. */
int fw_test_finish(void);

#ifdef __cplusplus
}
#endif

#endif /* FOREWARN_TESTING_H */

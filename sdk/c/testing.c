/* testing.c — the native stub host of testing.h: the host imports of wit/forewarn.wit
 * (forewarn_plugin_host_*) answered from what the test set up, each call recorded. Linked
 * instead of the component's imports by sdk/c/test.sh; never part of a plugin's .wasm. */
#define _GNU_SOURCE /* memrchr */
#include "testing.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* One stubbed answer, keyed by "METHOD URL", action name or resource. */
typedef struct {
    char *key;
    bool is_error;
    fw_test_error kind;
    char *text;   /* the body, stdout or token; the error detail */
    int number;   /* the HTTP status or exit code */
} stub;

typedef struct {
    stub *items;
    size_t len;
} stubs;

typedef struct {
    char *key;
    uint8_t *value;
    size_t len;
} entry;

typedef struct {
    entry *items;
    size_t len;
} table;

static char *plugin_name;
static table config_values, state_values;
static stubs http_stubs, action_stubs, token_stubs;
static bool readiness_granted;
static int last_ready = -1;
static fw_drain_status_t drain_answer = {0, 0, -1, -1};
static fw_test_call *calls;
static size_t calls_len;
static int checks, failures;

static void *checked(void *pointer) {
    if (pointer == NULL) {
        fprintf(stderr, "forewarn testing: out of memory\n");
        abort();
    }
    return pointer;
}

static char *copy_n(const void *bytes, size_t len) {
    char *copy = checked(malloc(len + 1));
    if (len) memcpy(copy, bytes, len);
    copy[len] = '\0';
    return copy;
}

static char *copy(const char *text) { return text ? copy_n(text, strlen(text)) : NULL; }

static char *from_wit(const event_handler_string_t *text) { return copy_n(text->ptr, text->len); }

/* ---- tables and stubs ---- */

static entry *table_find(table *t, const char *key) {
    for (size_t i = 0; i < t->len; i++)
        if (strcmp(t->items[i].key, key) == 0) return &t->items[i];
    return NULL;
}

static void table_put(table *t, const char *key, const void *value, size_t len) {
    entry *found = table_find(t, key);
    if (found == NULL) {
        t->items = checked(realloc(t->items, (t->len + 1) * sizeof *t->items));
        found = &t->items[t->len++];
        found->key = copy(key);
    } else {
        free(found->value);
    }
    found->value = (uint8_t *)copy_n(value, len);
    found->len = len;
}

static void table_remove(table *t, const char *key) {
    entry *found = table_find(t, key);
    if (found == NULL) return;
    free(found->key);
    free(found->value);
    *found = t->items[--t->len];
}

static void table_clear(table *t) {
    for (size_t i = 0; i < t->len; i++) {
        free(t->items[i].key);
        free(t->items[i].value);
    }
    free(t->items);
    t->items = NULL;
    t->len = 0;
}

static stub *stub_find(stubs *s, const char *key) {
    for (size_t i = 0; i < s->len; i++)
        if (strcmp(s->items[i].key, key) == 0) return &s->items[i];
    return NULL;
}

static void stub_put(stubs *s, const char *key, bool is_error, fw_test_error kind, const char *text, int number) {
    stub *found = stub_find(s, key);
    if (found == NULL) {
        s->items = checked(realloc(s->items, (s->len + 1) * sizeof *s->items));
        found = &s->items[s->len++];
        found->key = copy(key);
    } else {
        free(found->text);
    }
    found->is_error = is_error;
    found->kind = kind;
    found->text = copy(text ? text : "");
    found->number = number;
}

static void stubs_clear(stubs *s) {
    for (size_t i = 0; i < s->len; i++) {
        free(s->items[i].key);
        free(s->items[i].text);
    }
    free(s->items);
    s->items = NULL;
    s->len = 0;
}

static char *http_key(const char *method, const char *url) {
    size_t len = strlen(method) + strlen(url) + 2;
    char *key = checked(malloc(len));
    snprintf(key, len, "%s %s", method, url);
    for (char *c = key; *c != ' '; c++)
        if (*c >= 'a' && *c <= 'z') *c -= 'a' - 'A';
    return key;
}

/* ---- setup ---- */

void fw_test_reset(const char *plugin) {
    free(plugin_name);
    plugin_name = copy(plugin ? plugin : "test-plugin");
    table_clear(&config_values);
    table_clear(&state_values);
    stubs_clear(&http_stubs);
    stubs_clear(&action_stubs);
    stubs_clear(&token_stubs);
    readiness_granted = false;
    last_ready = -1;
    drain_answer = (fw_drain_status_t){0, 0, -1, -1};
    for (size_t i = 0; i < calls_len; i++) {
        free(calls[i].arg);
        free(calls[i].method);
        free(calls[i].body);
    }
    free(calls);
    calls = NULL;
    calls_len = 0;
}

static const char *plugin(void) { return plugin_name ? plugin_name : "test-plugin"; }

void fw_test_config(const char *key, const char *value) { table_put(&config_values, key, value, strlen(value)); }
void fw_test_state(const char *key, const void *value, size_t len) { table_put(&state_values, key, value, len); }
void fw_test_grant_readiness(bool granted) { readiness_granted = granted; }

void fw_test_drain_progress(uint32_t probers, uint32_t drained, int64_t drained_for_ms, int64_t not_ready_for_ms) {
    drain_answer = (fw_drain_status_t){probers, drained, drained_for_ms, not_ready_for_ms};
}

void fw_test_http_reply(const char *method, const char *url, int status, const char *body) {
    char *key = http_key(method, url);
    stub_put(&http_stubs, key, false, 0, body, status);
    free(key);
}

void fw_test_http_error(const char *method, const char *url, fw_test_error kind, const char *detail) {
    char *key = http_key(method, url);
    stub_put(&http_stubs, key, true, kind, detail, 0);
    free(key);
}

void fw_test_action_result(const char *name, int exit_code, const char *out) {
    stub_put(&action_stubs, name, false, 0, out, exit_code);
}

void fw_test_action_error(const char *name, fw_test_error kind, const char *detail) {
    stub_put(&action_stubs, name, true, kind, detail, 0);
}

void fw_test_access_token(const char *resource, const char *token) {
    stub_put(&token_stubs, resource, false, 0, token, 0);
}

void fw_test_access_token_error(const char *resource, fw_test_error kind, const char *detail) {
    stub_put(&token_stubs, resource, true, kind, detail, 0);
}

/* ---- inputs ---- */

static uint64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

static fw_str literal(const char *text) {
    fw_str value;
    event_handler_string_set(&value, text);
    return value;
}

static fw_str test_vm_resources[1];

fw_event fw_test_event(fw_event_type type) {
    static const char *const raw[] = {"Freeze", "Reboot", "Redeploy", "Preempt", "Terminate", "Unknown"};
    static const char *const descriptions[] = {
        "Freeze scheduled by the test", "Reboot scheduled by the test", "Redeploy scheduled by the test",
        "Preempt scheduled by the test", "Terminate scheduled by the test", "Unknown scheduled by the test"};
    size_t index = type <= FW_UNKNOWN_TYPE ? type : FW_UNKNOWN_TYPE;
    fw_event event;
    memset(&event, 0, sizeof event);
    test_vm_resources[0] = literal(FW_TEST_VM_NAME);
    event.id = literal(FW_TEST_EVENT_ID);
    event.event_type = type;
    event.event_type_raw = literal(raw[index]);
    event.resource_type = literal("VirtualMachine");
    event.resources.ptr = test_vm_resources;
    event.resources.len = 1;
    event.status = FOREWARN_PLUGIN_TYPES_EVENT_STATUS_SCHEDULED;
    event.not_before_unix_ms.is_some = true;
    event.not_before_unix_ms.val = now_ms() + (type == FW_PREEMPT ? 30000 : 15 * 60 * 1000);
    event.description = literal(descriptions[index]);
    event.source = FOREWARN_PLUGIN_TYPES_EVENT_SOURCE_PLATFORM;
    return event;
}

fw_context fw_test_context(void) {
    fw_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.vm_name = literal(FW_TEST_VM_NAME);
    ctx.affects_this_vm = true;
    ctx.deadline_unix_ms = now_ms() + 10000;
    ctx.attempt = 1;
    ctx.until_not_before_ms.is_some = true;
    ctx.until_not_before_ms.val = 15 * 60 * 1000;
    ctx.vm.priority = FW_VM_REGULAR;
    return ctx;
}

fw_start_context fw_test_start_context(void) {
    fw_start_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.vm_name = literal(FW_TEST_VM_NAME);
    ctx.vm.priority = FW_VM_REGULAR;
    ctx.deadline_unix_ms = now_ms() + 10000;
    return ctx;
}

/* ---- decisions ---- */

bool fw_test_is_approve(const fw_decision *decision) {
    return decision->tag == FOREWARN_PLUGIN_TYPES_DECISION_APPROVE;
}

const char *fw_test_defer_reason(const fw_decision *decision) {
    static char reason[1024];
    if (fw_test_is_approve(decision)) return "";
    fw_str text = decision->val.defer.reason;
    snprintf(reason, sizeof reason, "%.*s", (int)text.len, (const char *)text.ptr);
    return reason;
}

void fw_test_decision_free(fw_decision *decision) { forewarn_plugin_types_decision_free(decision); }

/* ---- recorded calls ---- */

static fw_test_call *record(const char *name, char *arg) {
    calls = checked(realloc(calls, (calls_len + 1) * sizeof *calls));
    fw_test_call *call = &calls[calls_len++];
    memset(call, 0, sizeof *call);
    call->name = name;
    call->arg = arg;
    return call;
}

size_t fw_test_calls(void) { return calls_len; }

const fw_test_call *fw_test_call_at(size_t i) { return i < calls_len ? &calls[i] : NULL; }

size_t fw_test_count(const char *name) {
    size_t count = 0;
    for (size_t i = 0; i < calls_len; i++) count += strcmp(calls[i].name, name) == 0;
    return count;
}

const fw_test_call *fw_test_find(const char *name, size_t nth) {
    for (size_t i = 0; i < calls_len; i++)
        if (strcmp(calls[i].name, name) == 0 && nth-- == 0) return &calls[i];
    return NULL;
}

size_t fw_test_effects(void) {
    return fw_test_count("state-set") + fw_test_count("state-delete") + fw_test_count("set-ready") +
           fw_test_count("http-send") + fw_test_count("run-action");
}

const char *fw_test_state_text(const char *key) {
    entry *found = table_find(&state_values, key);
    return found ? (const char *)found->value : NULL;
}

int fw_test_ready(void) { return last_ready; }

/* ---- checks ---- */

void fw_test_expect(bool ok, const char *condition, const char *file, int line) {
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, condition);
    }
}

int fw_test_finish(void) {
    if (failures) {
        fprintf(stderr, "FAILED: %d of %d checks\n", failures, checks);
        return 1;
    }
    printf("ok: %d checks passed\n", checks);
    return 0;
}

/* ---- the host imports ---- */

static bool fail(forewarn_plugin_host_host_error_t *err, fw_test_error kind, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(forewarn_plugin_host_host_error_t *err, fw_test_error kind, const char *format, ...) {
    char detail[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    memset(err, 0, sizeof *err);
    err->tag = kind;
    if (kind != FW_TEST_TIMED_OUT) event_handler_string_dup(&err->val.failed, detail);
    return false;
}

static bool stubbed_error(forewarn_plugin_host_host_error_t *err, const stub *found) {
    return fail(err, found->kind, "%s", found->text);
}

void forewarn_plugin_host_log(forewarn_plugin_host_level_t level, event_handler_string_t *message) {
    static const char *const levels[] = {"trace", "debug", "info", "warn", "error"};
    fw_test_call *call = record("log", from_wit(message));
    call->method = copy(level <= 4 ? levels[level] : "?");
    fprintf(stderr, "[%s] %s: %s\n", plugin(), call->method, call->arg);
}

bool forewarn_plugin_host_config(event_handler_string_t *key, event_handler_string_t *ret) {
    fw_test_call *call = record("config", from_wit(key));
    entry *found = table_find(&config_values, call->arg);
    if (found == NULL) return false;
    event_handler_string_dup_n(ret, (const char *)found->value, found->len);
    return true;
}

bool forewarn_plugin_host_state_get(event_handler_string_t *key, event_handler_list_u8_t *ret) {
    fw_test_call *call = record("state-get", from_wit(key));
    entry *found = table_find(&state_values, call->arg);
    if (found == NULL) return false;
    ret->ptr = (uint8_t *)copy_n(found->value, found->len);
    ret->len = found->len;
    return true;
}

bool forewarn_plugin_host_state_set(event_handler_string_t *key, event_handler_list_u8_t *value,
                                    forewarn_plugin_host_host_error_t *err) {
    fw_test_call *call = record("state-set", from_wit(key));
    call->body = (uint8_t *)copy_n(value->ptr, value->len);
    call->body_len = value->len;
    table_put(&state_values, call->arg, value->ptr, value->len);
    return true;
}

bool forewarn_plugin_host_state_delete(event_handler_string_t *key, forewarn_plugin_host_host_error_t *err) {
    fw_test_call *call = record("state-delete", from_wit(key));
    table_remove(&state_values, call->arg);
    return true;
}

bool forewarn_plugin_host_set_ready(bool ready, forewarn_plugin_host_host_error_t *err) {
    record("set-ready", NULL)->ready = ready;
    if (!readiness_granted)
        return fail(err, FW_TEST_NOT_GRANTED,
                    "plugin `%s` may not change readiness: add `readiness = true` under [capabilities] in its manifest",
                    plugin());
    last_ready = ready;
    return true;
}

bool forewarn_plugin_host_drain_progress(uint32_t unhealthy_threshold, forewarn_plugin_host_drain_status_t *ret,
                                         forewarn_plugin_host_host_error_t *err) {
    record("drain-progress", NULL);
    if (!readiness_granted)
        return fail(err, FW_TEST_NOT_GRANTED,
                    "plugin `%s` may not change readiness: add `readiness = true` under [capabilities] in its manifest",
                    plugin());
    if (unhealthy_threshold < 1 || unhealthy_threshold > 16)
        return fail(err, FW_TEST_INVALID,
                    "unhealthy-threshold %u is out of range: give the load balancer's own threshold, 1 to 16",
                    unhealthy_threshold);
    ret->probers = drain_answer.probers;
    ret->probers_drained = drain_answer.probers_drained;
    ret->drained_for_ms.is_some = drain_answer.drained_for_ms >= 0;
    ret->drained_for_ms.val = (uint64_t)(drain_answer.drained_for_ms >= 0 ? drain_answer.drained_for_ms : 0);
    ret->not_ready_for_ms.is_some = drain_answer.not_ready_for_ms >= 0;
    ret->not_ready_for_ms.val = (uint64_t)(drain_answer.not_ready_for_ms >= 0 ? drain_answer.not_ready_for_ms : 0);
    return true;
}

/* host:port of an absolute http(s) URL into `out`; false (with *err set) for anything else. */
static bool authority(const char *url, char *out, size_t size, forewarn_plugin_host_host_error_t *err) {
    const char *rest = strstr(url, "://");
    if (rest == NULL) return fail(err, FW_TEST_INVALID, "`%s` is not an absolute URL: relative URL without a base", url);
    size_t scheme_len = (size_t)(rest - url);
    int port = scheme_len == 4 && strncasecmp(url, "http", 4) == 0    ? 80
               : scheme_len == 5 && strncasecmp(url, "https", 5) == 0 ? 443
                                                                       : 0;
    if (port == 0)
        return fail(err, FW_TEST_INVALID, "`%s`: scheme `%.*s` is not supported; use http:// or https://", url,
                    (int)scheme_len, url);
    rest += 3;
    size_t len = strcspn(rest, "/?#");
    const char *at = memchr(rest, '@', len);
    if (at != NULL) {
        len -= (size_t)(at + 1 - rest);
        rest = at + 1;
    }
    if (len == 0) return fail(err, FW_TEST_INVALID, "`%s` names no host", url);
    const char *colon = memrchr(rest, ':', len);
    bool has_port = colon != NULL && colon + 1 < rest + len && memchr(colon, ']', (size_t)(rest + len - colon)) == NULL;
    if (has_port) snprintf(out, size, "%.*s", (int)len, rest);
    else snprintf(out, size, "%.*s:%d", (int)len, rest, port);
    for (char *c = out; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c += 'a' - 'A';
    return true;
}

bool forewarn_plugin_host_http_send(forewarn_plugin_host_http_request_t *request,
                                    forewarn_plugin_host_http_response_t *ret,
                                    forewarn_plugin_host_host_error_t *err) {
    fw_test_call *call = record("http-send", from_wit(&request->url));
    call->method = from_wit(&request->method);
    call->body = (uint8_t *)copy_n(request->body.ptr, request->body.len);
    call->body_len = request->body.len;
    char where[512];
    if (!authority(call->arg, where, sizeof where, err)) return false;
    char *key = http_key(call->method, call->arg);
    stub *found = stub_find(&http_stubs, key);
    free(key);
    if (found == NULL)
        return fail(err, FW_TEST_NOT_GRANTED,
                    "plugin `%s` may not send HTTP requests to %s: add \"%s\" to [capabilities] http in %s.toml "
                    "(in a test: fw_test_http_reply)",
                    plugin(), where, where, plugin());
    if (found->is_error) return stubbed_error(err, found);
    memset(ret, 0, sizeof *ret);
    ret->status = (uint16_t)found->number;
    ret->body.len = strlen(found->text);
    ret->body.ptr = (uint8_t *)copy_n(found->text, ret->body.len);
    return true;
}

bool forewarn_plugin_host_azure_access_token(event_handler_string_t *resource,
                                             forewarn_plugin_host_access_token_t *ret,
                                             forewarn_plugin_host_host_error_t *err) {
    fw_test_call *call = record("azure-access-token", from_wit(resource));
    stub *found = stub_find(&token_stubs, call->arg);
    if (found == NULL)
        return fail(err, FW_TEST_NOT_GRANTED,
                    "plugin `%s` may not ask for access tokens for `%s`: add \"%s\" to [capabilities] "
                    "azure-identity in %s.toml (in a test: fw_test_access_token)",
                    plugin(), call->arg, call->arg, plugin());
    if (found->is_error) return stubbed_error(err, found);
    event_handler_string_dup(&ret->token, found->text);
    ret->expires_on_unix_ms = now_ms() + 3600 * 1000;
    return true;
}

bool forewarn_plugin_host_run_action(event_handler_string_t *name, forewarn_plugin_host_action_output_t *ret,
                                     forewarn_plugin_host_host_error_t *err) {
    fw_test_call *call = record("run-action", from_wit(name));
    stub *found = stub_find(&action_stubs, call->arg);
    if (found == NULL)
        return fail(err, FW_TEST_NOT_GRANTED,
                    "plugin `%s` may not run action `%s`: add \"%s\" to [capabilities] actions in %s.toml "
                    "(in a test: fw_test_action_result)",
                    plugin(), call->arg, call->arg, plugin());
    if (found->is_error) return stubbed_error(err, found);
    memset(ret, 0, sizeof *ret);
    ret->exit_code.is_some = found->number >= 0;
    ret->exit_code.val = found->number;
    event_handler_string_dup(&ret->stdout_, found->text);
    event_handler_string_dup(&ret->stderr_, "");
    return true;
}

/* The component's import trampolines of the generated bindings, linked but never called
 * natively (test.sh renames the generated wrappers they serve). */
#define FW_TEST_NO_IMPORT(name) \
    void __wasm_import_forewarn_plugin_host_##name(void) { abort(); }
FW_TEST_NO_IMPORT(log)
FW_TEST_NO_IMPORT(config)
FW_TEST_NO_IMPORT(state_get)
FW_TEST_NO_IMPORT(state_set)
FW_TEST_NO_IMPORT(state_delete)
FW_TEST_NO_IMPORT(set_ready)
FW_TEST_NO_IMPORT(drain_progress)
FW_TEST_NO_IMPORT(http_send)
FW_TEST_NO_IMPORT(azure_access_token)
FW_TEST_NO_IMPORT(run_action)
/* Referenced by the generated bindings to link the component-type object into a wasm build. */
void __component_type_object_force_link_event_handler(void) {}

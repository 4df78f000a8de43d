/* forewarn.h — the C SDK for forewarn plugins.
 *
 * Write one function, fw_on_event(), and build with sdk/c/build.sh. Optionally define
 * fw_on_start() too (called once per daemon run, before any fw_on_event; the SDK's default
 * does nothing). This header wraps the
 * bindings that wit-bindgen generates from wit/forewarn.wit (event_handler.h) so that a
 * plugin deals in C strings, a typed event and two decision helpers.
 *
 * Memory: every string this SDK returns (fw_config, fw_string, ...) is malloc'd; free() it.
 * The event and context are owned by the SDK and valid only during the call.
 * Targets forewarn:plugin@0.3.0; plugins built against 0.1.0 keep loading unchanged.
 */
#ifndef FOREWARN_H
#define FOREWARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event_handler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The data a plugin receives (see wit/forewarn.wit for every field) ---- */

/* One Scheduled Event: id, event_type, event_type_raw, resources, status,
 * not_before_unix_ms (option), description, source, duration_seconds (option). */
typedef forewarn_plugin_types_scheduled_event_t fw_event;
/* vm_name, affects_this_vm, deadline_unix_ms, attempt, until_not_before_ms (option), vm. */
typedef forewarn_plugin_types_context_t fw_context;
/* What fw_on_start() is told: vm_name, vm, first_run, deadline_unix_ms. */
typedef forewarn_plugin_types_start_context_t fw_start_context;
/* This VM: priority (fw_vm_priority) and eviction_policy (option of fw_eviction_policy). */
typedef forewarn_plugin_types_vm_info_t fw_vm_info;
/* A WIT string: pointer + length, NOT NUL-terminated. fw_string() copies it into a C string. */
typedef event_handler_string_t fw_str;
/* The plugin's answer: build it with fw_approve() or fw_defer(). */
typedef forewarn_plugin_types_decision_t fw_decision;

typedef enum {
    FW_FREEZE = FOREWARN_PLUGIN_TYPES_EVENT_TYPE_FREEZE,
    FW_REBOOT = FOREWARN_PLUGIN_TYPES_EVENT_TYPE_REBOOT,
    FW_REDEPLOY = FOREWARN_PLUGIN_TYPES_EVENT_TYPE_REDEPLOY,
    FW_PREEMPT = FOREWARN_PLUGIN_TYPES_EVENT_TYPE_PREEMPT,
    FW_TERMINATE = FOREWARN_PLUGIN_TYPES_EVENT_TYPE_TERMINATE,
    /* Not from IMDS: the operating system shutting down with no Scheduled Event (0.3.0). */
    FW_SHUTDOWN = FOREWARN_PLUGIN_TYPES_EVENT_TYPE_SHUTDOWN,
    FW_UNKNOWN_TYPE = FOREWARN_PLUGIN_TYPES_EVENT_TYPE_UNKNOWN,
} fw_event_type;

typedef enum {
    FW_PREPARE = FOREWARN_PLUGIN_TYPES_PHASE_PREPARE,
    FW_STARTED = FOREWARN_PLUGIN_TYPES_PHASE_STARTED,
    FW_ENDED_AFTER_START = FOREWARN_PLUGIN_TYPES_PHASE_ENDED_AFTER_START,
    FW_ENDED_WITHOUT_START = FOREWARN_PLUGIN_TYPES_PHASE_ENDED_WITHOUT_START,
} fw_phase;

typedef enum {
    FW_VM_REGULAR = FOREWARN_PLUGIN_TYPES_VM_PRIORITY_REGULAR,
    FW_VM_SPOT = FOREWARN_PLUGIN_TYPES_VM_PRIORITY_SPOT,
    FW_VM_LOW = FOREWARN_PLUGIN_TYPES_VM_PRIORITY_LOW,
    FW_VM_UNKNOWN_PRIORITY = FOREWARN_PLUGIN_TYPES_VM_PRIORITY_UNKNOWN,
} fw_vm_priority;

typedef enum {
    FW_EVICTION_DEALLOCATE = FOREWARN_PLUGIN_TYPES_EVICTION_POLICY_DEALLOCATE,
    FW_EVICTION_DELETE = FOREWARN_PLUGIN_TYPES_EVICTION_POLICY_DELETE,
    FW_EVICTION_UNKNOWN = FOREWARN_PLUGIN_TYPES_EVICTION_POLICY_UNKNOWN,
} fw_eviction_policy;

typedef enum {
    FW_TRACE = FOREWARN_PLUGIN_HOST_LEVEL_TRACE,
    FW_DEBUG = FOREWARN_PLUGIN_HOST_LEVEL_DEBUG,
    FW_INFO = FOREWARN_PLUGIN_HOST_LEVEL_INFO,
    FW_WARN = FOREWARN_PLUGIN_HOST_LEVEL_WARN,
    FW_ERROR = FOREWARN_PLUGIN_HOST_LEVEL_ERROR,
} fw_level;

/* ---- What the plugin writes ---- */

/* The plugin's entry point: called for every transition of every subscribed event.
 * The answer matters in FW_PREPARE; in the other phases return fw_approve(). */
fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx);

/* Optional: called once per daemon run when the plugin is loaded, before any fw_on_event of
 * that run (ctx->first_run: the daemon found no journal, e.g. a Spot VM re-created after an
 * eviction with the delete policy: time to restore what an earlier VM saved elsewhere).
 * forewarn.c defines it as a weak no-op; define it in your plugin to override. */
void fw_on_start(const fw_start_context *ctx);

/* ---- Decisions ---- */

/* Ready: the maintenance may start as far as this plugin cares. */
fw_decision fw_approve(void);
/* Not yet: ask again after retry_after_ms. The reason is printf-formatted (copied). */
fw_decision fw_defer(uint32_t retry_after_ms, const char *reason_format, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- Event helpers ---- */

/* "Freeze", "Reboot", ... ("Unknown" for a type this contract does not know). */
const char *fw_event_type_name(fw_event_type type);
/* "prepare", "started", "ended-after-start", "ended-without-start". */
const char *fw_phase_name(fw_phase phase);
/* A malloc'd, NUL-terminated copy of a WIT string (free() it). NULL when out of memory. */
char *fw_string(fw_str text);
/* Whether a WIT string equals a C string. */
bool fw_str_eq(fw_str text, const char *c_string);

/* ---- VM and timing helpers ---- */

/* Whether Azure may evict this VM (a Spot or low-priority VM). */
bool fw_vm_is_evictable(const fw_vm_info *vm);
/* Whether an eviction deletes the VM and its disks (evictable, policy delete): a checkpoint
 * must leave the VM before the Preempt's NotBefore. */
bool fw_vm_eviction_deletes_disks(const fw_vm_info *vm);
/* "regular", "spot", "low", "unknown". */
const char *fw_vm_priority_name(fw_vm_priority priority);
/* "deallocate", "delete", "unknown". */
const char *fw_eviction_policy_name(fw_eviction_policy policy);
/* Milliseconds from the start of this call to the event's NotBefore (0 when it has passed),
 * or -1 when the event has no NotBefore (it has started). */
long long fw_until_not_before_ms(const fw_context *ctx);

/* ---- Host calls ---- */

/* A line in the daemon's log under this plugin's name (printf-formatted). */
void fw_log(fw_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));
#define fw_info(...) fw_log(FW_INFO, __VA_ARGS__)
#define fw_warn(...) fw_log(FW_WARN, __VA_ARGS__)
#define fw_error(...) fw_log(FW_ERROR, __VA_ARGS__)

/* A value from the manifest's [config] table as a malloc'd C string, or NULL if absent. */
char *fw_config(const char *key);
/* A [config] value read as an integer; `fallback` when absent or not a number. */
long long fw_config_int(const char *key, long long fallback);

/* Durable state. fw_state_get returns a malloc'd copy (length in *len, NUL-terminated for
 * convenience) or NULL when the key is absent; the setters return true on success. */
void *fw_state_get(const char *key, size_t *len);
bool fw_state_set(const char *key, const void *value, size_t len);
bool fw_state_delete(const char *key);

/* Marks this VM ready or not on /readyz (needs `readiness = true`). True on success. */
bool fw_set_ready(bool ready);

/* What the load balancers probing /readyz have seen since the VM was marked not ready
 * (`drain-progress`, forewarn:plugin@0.3.0). */
typedef struct {
    uint32_t probers;         /* probers of /readyz in the last minute; 0: none probes forewarn */
    uint32_t probers_drained; /* of those, answered 503 `unhealthy_threshold` times in a row */
    int64_t drained_for_ms;   /* ms since every prober has; -1 until then */
    int64_t not_ready_for_ms; /* ms since the VM was marked not ready; -1 while it is ready */
} fw_drain_status_t;

/* Fills *out with the drain's progress at load balancers that take a VM out after
 * `unhealthy_threshold` failed probes in a row (their own setting, 1 to 16). Needs
 * `[capabilities] readiness = true`. Returns false on failure (the reason is logged as a
 * warning). */
bool fw_drain_progress(uint32_t unhealthy_threshold, fw_drain_status_t *out);

/* POSTs `body` to `url` (its host:port on `[capabilities] http`). Returns the HTTP status,
 * or -1 when the request failed (the reason is logged as a warning). */
int fw_http_post(const char *url, const char *content_type, const void *body, size_t len);

/* An access token of the VM's managed identity for `resource` (e.g. FW_AZURE_STORAGE; needs
 * it in the manifest's `[capabilities] azure-identity`). On success returns a malloc'd,
 * NUL-terminated bearer token that the caller owns and must free(), and stores its expiry
 * (ms since the Unix epoch) in *expires_on_unix_ms when that is not NULL. Returns NULL on
 * failure (the reason is logged as a warning). Ask again rather than keeping a token: the
 * host caches tokens and renews them before expiry. */
char *fw_azure_access_token(const char *resource, uint64_t *expires_on_unix_ms);
/* The resource of Azure Storage (blobs, queues, tables). */
#define FW_AZURE_STORAGE "https://storage.azure.com/"

#ifdef __cplusplus
}
#endif

#endif /* FOREWARN_H */

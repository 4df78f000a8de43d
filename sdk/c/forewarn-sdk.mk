# forewarn-sdk.mk — the forewarn C SDK 0.3.0 (forewarn:plugin@0.3.0) for a plugin's Makefile.
# Components it builds load in forewarn 0.1.0 and later (every release serving
# forewarn:plugin@0.3.0). In your Makefile:
#
#   FOREWARN_SDK ?= vendor/forewarn-sdk        # this folder; or, once it is installed:
#   # FOREWARN_SDK ?= $(shell pkg-config --variable=sdkdir 'forewarn-sdk >= 0.3.0')
#   include $(FOREWARN_SDK)/forewarn-sdk.mk
#
#   my-plugin.wasm: my_plugin.c
#   	$(forewarn_build)                          # clang + wasi-libc, then forewarn sdk component-new
#   test:
#   	$(call forewarn_test,my_plugin.c test_my_plugin.c)   # gcc against testing.c, natively
#
# Needs: clang (>= 16) with wasi-libc and the wasm32 compiler-rt (Debian: clang-19 lld-19
# wasi-libc libclang-rt-19-dev-wasm32), a native C compiler for the tests ($(CC), default gcc),
# and the forewarn binary, whose `forewarn sdk component-new` wraps clang's core module into a
# component (what `wasm-tools component new` does; wasi-libc cannot do it alone).

FOREWARN_SDK ?= $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
FOREWARN_SDK_VERSION := 0.3.0
FOREWARN_WIT := forewarn:plugin@0.3.0
FOREWARN ?= forewarn
FOREWARN_CLANG ?= $(or $(shell command -v clang-19 2>/dev/null),clang)
CC := $(if $(filter default,$(origin CC)),gcc,$(CC))

ifeq ($(wildcard $(FOREWARN_SDK)/forewarn.h),)
$(error the forewarn C SDK is not at '$(FOREWARN_SDK)': set FOREWARN_SDK to the folder of forewarn-sdk.mk (forewarn sdk export DIR --lang c writes one))
endif

FOREWARN_WASM_CFLAGS := --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Wno-unused-parameter \
	-I$(FOREWARN_SDK) -I$(FOREWARN_SDK)/generated
FOREWARN_WASM_SDK := $(FOREWARN_SDK)/forewarn.c $(FOREWARN_SDK)/generated/event_handler.c \
	$(FOREWARN_SDK)/generated/event_handler_component_type.o

# The recipe of a plugin component: its prerequisites' .c files, the SDK, the component step.
# A plugin without fw_on_event fails at the link: the error says which function to add.
FOREWARN_NO_ON_EVENT := error: the plugin defines no fw_on_event function, so it would have nothing to answer events with: \
	add `fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx)` returning fw_approve() or fw_defer(...)
forewarn_build = { $(FOREWARN_CLANG) $(FOREWARN_WASM_CFLAGS) $(filter %.c,$^) $(FOREWARN_WASM_SDK) -o $@.core 2> $@.err \
	|| { cat $@.err >&2; ! grep -q 'undefined symbol: fw_on_event' $@.err || echo '$(FOREWARN_NO_ON_EVENT)' >&2; rm -f $@.err; false; }; } \
	&& cat $@.err >&2 && rm -f $@.err \
	&& $(FOREWARN) sdk component-new $@.core -o $@ && rm -f $@.core

# The native tests: $(call forewarn_test,SOURCES) compiles SOURCES (the plugin and a test file
# with main() returning fw_test_finish()) against testing.c, the SDK's stub host, and runs them.
# The generated host wrappers lower calls into wasm imports; natively testing.c is the host, so
# they are renamed out of the way.
FOREWARN_HOST_CALLS := log config state_get state_set state_delete set_ready drain_progress http_send azure_access_token run_action
FOREWARN_TEST_RENAMES := $(foreach call,$(FOREWARN_HOST_CALLS),-Dforewarn_plugin_host_$(call)=fw_generated_host_$(call))
FOREWARN_TEST_CFLAGS := -g -O0 -Wall -Wextra -Wno-unused-parameter -fsanitize=address,undefined -fno-omit-frame-pointer \
	-I$(FOREWARN_SDK) -I$(FOREWARN_SDK)/generated
forewarn_test = work=$$(mktemp -d) && trap 'rm -rf "$$work"' EXIT \
	&& $(CC) -w -c $(FOREWARN_TEST_RENAMES) -I$(FOREWARN_SDK)/generated $(FOREWARN_SDK)/generated/event_handler.c -o "$$work/event_handler.o" \
	&& $(CC) $(FOREWARN_TEST_CFLAGS) $(1) $(FOREWARN_SDK)/forewarn.c $(FOREWARN_SDK)/testing.c "$$work/event_handler.o" -o "$$work/test" \
	&& ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=0} "$$work/test"

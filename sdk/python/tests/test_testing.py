"""Tests of forewarn.testing, the native test host of the Python SDK (run: sdk/python/test.sh)."""

import dataclasses
import importlib
import pathlib
import shutil
import subprocess
import sys

import pytest

import forewarn
from forewarn import EventType, HostError, Phase, approve, defer, testing
from forewarn import _native
from forewarn.testing import TestHost, context, event, start_context

HOOK = "http://hooks.internal:8080/events"


def drain_plugin(ev, phase, ctx):
    """A plugin using every host call: what the tests below assert on."""
    if phase != Phase.PREPARE:
        forewarn.state.delete("drained")
        return approve()
    forewarn.log.info(f"{ev.event_type_raw} {ev.id}")
    retry = int(forewarn.config("retry-ms", "5000"))
    answer = forewarn.http.post(forewarn.config("url", HOOK), '{"drain": true}')
    if not answer.ok:
        return defer(f"hook answered {answer.status}", retry)
    output = forewarn.run_action("drain")
    if output.exit_code != 0:
        return defer(f"drain exited {output.exit_code}", retry)
    token = forewarn.identity.access_token(forewarn.identity.STORAGE)
    forewarn.http.send("PUT", "https://acct.blob.core.windows.net/c/x", b"state",
                       [("authorization", token.bearer())])
    forewarn.set_ready(False)
    count = int(forewarn.state.get("count") or b"0") + 1
    forewarn.state.set("count", str(count).encode())
    return approve()


def full_host():
    return (TestHost("drain").config("retry-ms", "7000")
            .http_reply("POST", HOOK, 204)
            .http_reply("PUT", "https://acct.blob.core.windows.net/c/x", 201)
            .action_result("drain", 0, stdout="drained")
            .access_token(forewarn.identity.STORAGE, "tok-1")
            .ready()
            .state("count", b"41"))


def test_approves_and_records_every_call_in_order():
    host = full_host()
    decision = host.on_event(drain_plugin, event(EventType.REBOOT), Phase.PREPARE)
    assert decision == approve()
    assert [call.name for call in host.effects] == [
        "http-send", "run-action", "http-send", "set-ready", "state-set"]
    first, second = host.http_requests
    assert (first.method, first.url, first.body) == ("POST", HOOK, b'{"drain": true}')
    assert ("content-type", "application/json") in first.headers
    assert ("authorization", "Bearer tok-1") in second.headers
    assert host.actions_run == ["drain"]
    assert host.tokens_requested == [forewarn.identity.STORAGE]
    assert host.state_writes == [("count", b"42")]
    assert host.state_text("count") == "42"
    assert host.is_ready is False
    assert host.logs == [("info", "Reboot test-event-1")]


def test_a_stubbed_failure_reaches_the_plugin():
    host = full_host().http_reply("POST", HOOK, 503)
    decision = host.on_event(drain_plugin, event(EventType.REBOOT), Phase.PREPARE)
    assert decision == defer("hook answered 503", 7000)
    assert host.actions_run == []

    host = full_host().action_result("drain", 3)
    assert host.on_event(drain_plugin, event(), Phase.PREPARE) == defer("drain exited 3", 7000)


def test_ungranted_calls_raise_not_granted_naming_the_manifest_line():
    host = TestHost("drain")
    with pytest.raises(HostError) as raised:
        host.on_event(drain_plugin, event(), Phase.PREPARE)
    assert raised.value.kind == "not-granted"
    assert '"hooks.internal:8080" to [capabilities] http in drain.toml' in raised.value.detail
    assert len(host.http_requests) == 1

    for call, expected in [
        (lambda: forewarn.run_action("x"), "actions"),
        (lambda: forewarn.identity.access_token("https://vault.azure.net"), "azure-identity"),
        (lambda: forewarn.set_ready(True), "readiness = true"),
    ]:
        with pytest.raises(HostError) as raised:
            host.run(call)
        assert raised.value.kind == "not-granted" and expected in raised.value.detail


def test_errors_and_handlers_and_invalid_urls():
    host = (TestHost().http_error("GET", "http://a:1/", "timed-out")
            .http_handler(lambda request: (418, request.url))
            .action_error("drain", "failed", "no such file"))
    with pytest.raises(HostError) as raised:
        host.run(lambda: forewarn.http.get("http://a:1/"))
    assert raised.value.kind == "timed-out"
    answer = host.run(lambda: forewarn.http.get("http://b:2/x"))
    assert (answer.status, answer.text()) == (418, "http://b:2/x")
    with pytest.raises(HostError) as raised:
        host.run(lambda: forewarn.run_action("drain"))
    assert (raised.value.kind, raised.value.detail) == ("failed", "no such file")
    with pytest.raises(HostError) as raised:
        host.run(lambda: forewarn.http.get("hooks/x"))
    assert raised.value.kind == "invalid"
    with pytest.raises(ValueError):
        TestHost().http_error("GET", HOOK, "nope")


def test_state_and_config_carry_over_between_calls_and_phases():
    host = full_host()
    host.on_event(drain_plugin, event(), Phase.PREPARE)
    host.on_event(drain_plugin, event(), Phase.PREPARE)
    assert host.state_text("count") == "43"
    host.state("drained", "yes")
    assert host.on_event(drain_plugin, event(), Phase.ENDED_AFTER_START) == approve()
    assert "drained" not in host.state_now
    assert host.state_writes[-1] == ("drained", None)


def test_on_start_and_calls_outside_a_host():
    seen = []
    plugin = type("Plugin", (), {
        "on_event": staticmethod(drain_plugin),
        "on_start": staticmethod(lambda ctx: seen.append((ctx.first_run, forewarn.config("k")))),
    })
    host = TestHost().config("k", "v")
    host.on_start(plugin, start_context(first_run=True))
    assert seen == [(True, "v")]
    assert [call.name for call in host.calls] == ["config"]
    # Outside TestHost.run: an empty host that grants nothing, never a crash.
    assert forewarn.config("k") is None
    with pytest.raises(HostError):
        forewarn.set_ready(True)


def test_inputs_are_consistent_and_replaceable():
    ev = event(EventType.PREEMPT, resources=["other-vm"])
    ctx = testing.context_for(ev)
    assert ev.event_type_raw == "Preempt" and ctx.affects_this_vm is False
    assert 0 < ctx.until_not_before_ms <= 30_000
    assert context(attempt=3).attempt == 3
    assert ctx.vm.is_evictable() is False


def test_native_types_mirror_the_generated_bindings(tmp_path):
    """The mirrors in forewarn/_native.py have the generated bindings' fields and members."""
    sdk = pathlib.Path(__file__).resolve().parents[1]
    tool = sdk / ".venv" / "bin" / "componentize-py"
    if not tool.exists():
        tool = shutil.which("componentize-py")
    if tool is None:
        pytest.skip("componentize-py not installed: run tests/install-language-toolchains.sh python")
    subprocess.run([str(tool), "-d", str(sdk.parents[1] / "wit"), "-w", "event-handler",
                    "bindings", str(tmp_path)], check=True, capture_output=True)
    sys.path.insert(0, str(tmp_path))
    try:
        generated = {name: importlib.import_module(f"wit_world.imports.{name}")
                     for name in ("types", "host")}
    finally:
        sys.path.remove(str(tmp_path))
    for module_name, module in generated.items():
        for name, value in vars(module).items():
            if not isinstance(value, type) or value.__module__ != module.__name__:
                continue
            mirror = getattr(getattr(_native, module_name), name, None)
            assert mirror is not None, f"forewarn/_native.py lacks {module_name}.{name}"
            if dataclasses.is_dataclass(value):
                assert [f.name for f in dataclasses.fields(mirror)] == \
                    [f.name for f in dataclasses.fields(value)], name
            else:
                assert [(m.name, m.value) for m in mirror] == [(m.name, m.value) for m in value], name
        for name in ("log", "config", "state_get", "state_set", "state_delete", "set_ready",
                     "drain_progress", "http_send", "azure_access_token", "run_action"):
            if module_name == "host":
                assert callable(getattr(_native.host, name))


def test_drain_progress_answers_what_the_test_stubbed():
    host = TestHost()
    with pytest.raises(forewarn.HostError) as refused:
        host.run(lambda: forewarn.drain_progress(3))
    assert refused.value.kind == "not-granted"
    host.ready()
    unprobed = host.run(lambda: forewarn.drain_progress(3))
    assert (unprobed.probers, unprobed.drained_for_ms) == (0, None)
    host.drain_progress(2, 1).drain_progress(2, 2, drained_for_ms=1500, not_ready_for_ms=4000)
    first = host.run(lambda: forewarn.drain_progress(3))
    second = host.run(lambda: forewarn.drain_progress(3))
    assert (first.probers, first.probers_drained, first.drained_for_ms) == (2, 1, None)
    assert (second.probers_drained, second.drained_for_ms, second.not_ready_for_ms) == (2, 1500, 4000)
    with pytest.raises(forewarn.HostError) as invalid:
        host.run(lambda: forewarn.drain_progress(0))
    assert invalid.value.kind == "invalid"
    assert [call.args for call in host.calls if call.name == "drain-progress"] == [(3,)] * 4 + [(0,)]


def test_handler_lets_native_tests_see_the_plugins_exception():
    def broken(ev, phase, ctx):
        raise ValueError("boom")

    Handler = forewarn.handler(broken)
    with pytest.raises(ValueError, match="boom"):
        TestHost().run(lambda: Handler().on_event(event(EventType.REBOOT), Phase.PREPARE, context()))


def test_handler_without_on_event_names_the_fix():
    with pytest.raises(TypeError, match="define `def on_event"):
        forewarn.handler(None)


def test_raised_at_names_the_innermost_frame_of_the_plugins_own_code():
    def limit(text):
        return int(text)

    try:
        limit("ten")
    except ValueError as error:
        import traceback

        where = forewarn._raised_at(traceback.extract_tb(error.__traceback__))
    assert where.startswith(" at test_testing.py:") and where.endswith(", in limit"), where

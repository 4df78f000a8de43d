"""forewarn.testing — native unit tests of Python plugins (pytest), without the daemon.

A ``TestHost`` stands in for the daemon: give it config values, state, HTTP answers, action
results, access tokens and the readiness grant; run the plugin's real ``on_event`` (or
``on_start``) through it; then assert on the decision and on the calls the plugin made::

    from forewarn import EventType, Phase, approve
    from forewarn.testing import TestHost, event, context
    import my_plugin

    def test_posts_and_approves():
        host = TestHost().config("url", "http://hooks:8080/x").http_reply("POST", "http://hooks:8080/x", 204)
        decision = host.on_event(my_plugin, event(EventType.REBOOT), Phase.PREPARE, context())
        assert decision == approve()
        assert [r.url for r in host.http_requests] == ["http://hooks:8080/x"]

What was not given is answered as the daemon answers a plugin whose manifest grants nothing:
``config`` and ``state.get`` return None; ``set_ready``, ``http.send``, ``run_action`` and
``identity.access_token`` raise ``HostError`` with kind "not-granted" and a text naming the
manifest line to add; a URL that is not absolute http(s) is "invalid". Log lines are recorded
and printed to stderr (pytest shows them when a test fails). Host calls made outside
``TestHost.run``/``on_event``/``on_start`` go to an empty test host that grants nothing.
"""

import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import forewarn
from forewarn import _native

if forewarn._host is not _native.host:  # pragma: no cover - only inside a component
    raise ImportError("forewarn.testing runs natively (pytest), not inside the component")

__all__ = [
    "TestHost", "Call", "event", "context", "context_for", "start_context", "exited",
    "VM_NAME", "EVENT_ID", "NOTICE_MS", "BUDGET_MS",
]

#: The VM the test inputs describe; ``event()`` lists it in ``resources``.
VM_NAME = "test-vm"
#: The id of ``event()``.
EVENT_ID = "test-event-1"
#: ``context()``'s time to NotBefore: 15 minutes, a platform event's usual notice.
NOTICE_MS = 15 * 60 * 1000
#: ``context()``'s and ``start_context()``'s time to the deadline: 10 seconds.
BUDGET_MS = 10 * 1000

_HOST_ERRORS = {
    "not-granted": _native.HostError_NotGranted,
    "invalid": _native.HostError_Invalid,
    "failed": _native.HostError_Failed,
}


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---- Test inputs with sensible defaults; change any field with dataclasses.replace ----

def event(event_type: forewarn.EventType = forewarn.EventType.REBOOT, **fields) -> forewarn.Event:
    """A Scheduled Event of ``event_type`` for ``VM_NAME``, scheduled 15 minutes from now
    (30 seconds for a Preempt). Keyword arguments replace fields."""
    raw = "Unknown" if event_type == forewarn.EventType.UNKNOWN else event_type.name.capitalize()
    notice = 30_000 if event_type == forewarn.EventType.PREEMPT else NOTICE_MS
    value = _native.ScheduledEvent(
        id=EVENT_ID, event_type=event_type, event_type_raw=raw, resource_type="VirtualMachine",
        resources=[VM_NAME], status=forewarn.EventStatus.SCHEDULED,
        not_before_unix_ms=_now_ms() + notice, description=f"{raw} scheduled by the test",
        source=forewarn.EventSource.PLATFORM, duration_seconds=None)
    return replace(value, **fields)


def context(**fields) -> forewarn.Context:
    """This VM (a regular VM), first attempt, 15 minutes to NotBefore, 10 seconds to answer."""
    value = _native.Context(
        vm_name=VM_NAME, affects_this_vm=True, deadline_unix_ms=_now_ms() + BUDGET_MS,
        attempt=1, until_not_before_ms=NOTICE_MS,
        vm=_native.VmInfo(priority=forewarn.VmPriority.REGULAR, eviction_policy=None))
    return replace(value, **fields)


def context_for(ev: forewarn.Event, **fields) -> forewarn.Context:
    """``context()`` consistent with ``ev``: whether it names ``VM_NAME``, and its NotBefore."""
    until = None if ev.not_before_unix_ms is None else max(0, ev.not_before_unix_ms - _now_ms())
    return context(affects_this_vm=VM_NAME in ev.resources, until_not_before_ms=until, **fields)


def start_context(**fields) -> forewarn.StartContext:
    """What ``on_start`` is told: this VM, not a first run, 10 seconds to return."""
    value = _native.StartContext(
        vm_name=VM_NAME, vm=_native.VmInfo(priority=forewarn.VmPriority.REGULAR, eviction_policy=None),
        first_run=False, deadline_unix_ms=_now_ms() + BUDGET_MS)
    return replace(value, **fields)


def exited(code: int, stdout: str = "", stderr: str = "") -> _native.ActionOutput:
    """An action's output: it exited with ``code``."""
    return _native.ActionOutput(exit_code=code, stdout=stdout, stderr=stderr)


@dataclass(frozen=True)
class Call:
    """One host call the plugin made, in order: ``name`` is the WIT function ("log", "config",
    "state-get", "state-set", "state-delete", "set-ready", "drain-progress", "http-send", "run-action",
    "azure-access-token"), ``args`` its arguments (an ``http-send``'s is the HttpRequest)."""

    name: str
    args: Tuple[Any, ...]

    @property
    def is_effect(self) -> bool:
        """Whether the call changes something outside the plugin (not a read, not a log)."""
        return self.name in ("state-set", "state-delete", "set-ready", "http-send", "run-action")


Reply = Union[_native.HttpResponse, forewarn.HostError, Tuple[int, Union[bytes, str]], int]


class TestHost:
    """The daemon, as a plugin's native test sets it up. The setters return the host, so
    they chain; config, state and stubs carry over from one call to the next."""

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, plugin: str = "test-plugin"):
        self.plugin = plugin
        self._config: Dict[str, str] = {}
        self._state: Dict[str, bytes] = {}
        self._readiness_granted = False
        self._ready: Optional[bool] = None
        self._drain_answers: List[_native.DrainStatus] = []
        self._http: Dict[Tuple[str, str], Reply] = {}
        self._http_handler: Optional[Callable[[_native.HttpRequest], Reply]] = None
        self._actions: Dict[str, Union[_native.ActionOutput, forewarn.HostError]] = {}
        self._tokens: Dict[str, Union[_native.AccessToken, forewarn.HostError]] = {}
        #: Every host call, in order.
        self.calls: List[Call] = []

    # ---- What the plugin will find ----

    def config(self, key: str, value: str) -> "TestHost":
        """A value of the manifest's [config] table."""
        self._config[key] = str(value)
        return self

    def state(self, key: str, value: Union[bytes, str]) -> "TestHost":
        """A value already in the plugin's durable state (str is stored UTF-8)."""
        self._state[key] = value.encode() if isinstance(value, str) else bytes(value)
        return self

    def ready(self, granted: bool = True) -> "TestHost":
        """Grants (or not) the ``readiness`` capability, so ``set_ready`` succeeds."""
        self._readiness_granted = granted
        return self

    def drain_progress(self, probers: int, probers_drained: int = 0,
                       drained_for_ms: Optional[int] = None,
                       not_ready_for_ms: Optional[int] = None) -> "TestHost":
        """What ``drain_progress`` answers. Given again, answers queue; the last one repeats.
        Without one, no load balancer probes /readyz (0 probers)."""
        self._drain_answers.append(_native.DrainStatus(probers, probers_drained,
                                                         drained_for_ms, not_ready_for_ms))
        return self

    def http_reply(self, method: str, url: str, status: int, body: Union[bytes, str] = b"",
                   headers: Optional[List[Tuple[str, str]]] = None) -> "TestHost":
        """Answers requests of ``method`` to exactly ``url`` with ``status`` and ``body``."""
        self._http[(method.upper(), url)] = _response(status, body, headers)
        return self

    def http_error(self, method: str, url: str, kind: str, detail: str = "") -> "TestHost":
        """Requests of ``method`` to ``url`` fail with a HostError of ``kind`` ("not-granted",
        "invalid", "failed", "timed-out")."""
        self._http[(method.upper(), url)] = forewarn.HostError("http-send", _kind(kind), detail)
        return self

    def http_handler(self, handler: Callable[[_native.HttpRequest], Reply]) -> "TestHost":
        """Answers requests no ``http_reply``/``http_error`` matched: ``handler(request)``
        returns a status, ``(status, body)``, an HttpResponse, or a HostError."""
        self._http_handler = handler
        return self

    def action_result(self, name: str, exit_code: Optional[int] = 0, stdout: str = "",
                      stderr: str = "") -> "TestHost":
        """Grants action ``name``; running it returns this output (exit_code None: killed)."""
        self._actions[name] = _native.ActionOutput(exit_code=exit_code, stdout=stdout, stderr=stderr)
        return self

    def action_error(self, name: str, kind: str, detail: str = "") -> "TestHost":
        """Running action ``name`` fails with a HostError of ``kind``."""
        self._actions[name] = forewarn.HostError("run-action", _kind(kind), detail)
        return self

    def access_token(self, resource: str, token: str,
                     expires_on_unix_ms: Optional[int] = None) -> "TestHost":
        """Grants ``resource`` in azure-identity; asking for it returns ``token`` (valid for
        an hour unless ``expires_on_unix_ms`` says otherwise)."""
        expiry = _now_ms() + 3_600_000 if expires_on_unix_ms is None else expires_on_unix_ms
        self._tokens[resource] = _native.AccessToken(token=token, expires_on_unix_ms=expiry)
        return self

    def access_token_error(self, resource: str, kind: str, detail: str = "") -> "TestHost":
        """Asking for a token for ``resource`` fails with a HostError of ``kind``."""
        self._tokens[resource] = forewarn.HostError("azure-access-token", _kind(kind), detail)
        return self

    # ---- Running the plugin ----

    def run(self, code: Callable[[], Any]) -> Any:
        """Calls ``code()`` with this host answering the SDK's host calls; returns its result.
        Exceptions propagate (pytest shows the traceback)."""
        global _current_host
        previous, _current_host = _current_host, self
        try:
            return code()
        finally:
            _current_host = previous

    def on_event(self, plugin, ev: forewarn.Event, phase: forewarn.Phase,
                 ctx: Optional[forewarn.Context] = None) -> forewarn.Decision:
        """The plugin's ``on_event(ev, phase, ctx)`` (``plugin``: its module, or the function)
        with this host; ``ctx`` defaults to ``context_for(ev)``."""
        function = getattr(plugin, "on_event", plugin)
        return self.run(lambda: function(ev, phase, context_for(ev) if ctx is None else ctx))

    def on_start(self, plugin, ctx: Optional[forewarn.StartContext] = None) -> None:
        """The plugin's ``on_start(ctx)`` with this host; nothing when it has none."""
        function = getattr(plugin, "on_start", None) if hasattr(plugin, "on_event") else plugin
        if function is not None:
            self.run(lambda: function(start_context() if ctx is None else ctx))

    # ---- What the plugin did ----

    @property
    def effects(self) -> List[Call]:
        """The calls that changed something: state writes, readiness, HTTP, actions."""
        return [call for call in self.calls if call.is_effect]

    @property
    def http_requests(self) -> List[_native.HttpRequest]:
        """The HTTP requests sent, in order (answered or not)."""
        return [call.args[0] for call in self.calls if call.name == "http-send"]

    @property
    def actions_run(self) -> List[str]:
        """The names of the actions run, in order (granted or not)."""
        return [call.args[0] for call in self.calls if call.name == "run-action"]

    @property
    def tokens_requested(self) -> List[str]:
        """The resources access tokens were asked for, in order."""
        return [call.args[0] for call in self.calls if call.name == "azure-access-token"]

    @property
    def state_writes(self) -> List[Tuple[str, Optional[bytes]]]:
        """``(key, value)`` per state write in order; value None for a delete."""
        return [(call.args[0], call.args[1] if call.name == "state-set" else None)
                for call in self.calls if call.name in ("state-set", "state-delete")]

    @property
    def logs(self) -> List[Tuple[str, str]]:
        """``(level, message)`` per log line, level "trace" … "error"."""
        return [(call.args[0].name.lower(), call.args[1]) for call in self.calls if call.name == "log"]

    @property
    def state_now(self) -> Dict[str, bytes]:
        """The plugin's state as it stands."""
        return dict(self._state)

    def state_text(self, key: str) -> Optional[str]:
        """A state value as UTF-8 text, or None when absent."""
        value = self._state.get(key)
        return None if value is None else value.decode("utf-8", errors="replace")

    @property
    def is_ready(self) -> Optional[bool]:
        """What the plugin last set with ``set_ready`` (None: never set, or not granted)."""
        return self._ready

    # ---- The host imports (called by forewarn._native) ----

    def _record(self, name: str, *args) -> None:
        self.calls.append(Call(name, args))

    def _import_log(self, level, message: str) -> None:
        self._record("log", level, message)
        print(f"[{self.plugin}] {level.name.lower()}: {message}", file=sys.stderr)

    def _import_config(self, key: str) -> Optional[str]:
        self._record("config", key)
        return self._config.get(key)

    def _import_state_get(self, key: str) -> Optional[bytes]:
        self._record("state-get", key)
        return self._state.get(key)

    def _import_state_set(self, key: str, value: bytes) -> None:
        self._record("state-set", key, bytes(value))
        self._state[key] = bytes(value)

    def _import_state_delete(self, key: str) -> None:
        self._record("state-delete", key)
        self._state.pop(key, None)

    def _import_set_ready(self, ready: bool) -> None:
        self._record("set-ready", ready)
        if not self._readiness_granted:
            raise _err("not-granted", f"plugin `{self.plugin}` may not change readiness: add "
                       "`readiness = true` under [capabilities] in its manifest")
        self._ready = ready

    def _import_drain_progress(self, threshold: int) -> _native.DrainStatus:
        self._record("drain-progress", threshold)
        if not self._readiness_granted:
            raise _err("not-granted", f"plugin `{self.plugin}` may not change readiness: add "
                       "`readiness = true` under [capabilities] in its manifest")
        if not 1 <= threshold <= 16:
            raise _err("invalid", f"unhealthy-threshold {threshold} is out of range: give the "
                       "load balancer's own threshold, 1 to 16")
        if len(self._drain_answers) > 1:
            return self._drain_answers.pop(0)
        if self._drain_answers:
            return self._drain_answers[0]
        return _native.DrainStatus(0, 0, None, None)

    def _import_http_send(self, request: _native.HttpRequest) -> _native.HttpResponse:
        request = replace(request, headers=list(request.headers), body=bytes(request.body))
        self._record("http-send", request)
        authority = _authority(request.url)
        reply = self._http.get((request.method.upper(), request.url))
        if reply is None and self._http_handler is not None:
            reply = self._http_handler(request)
        if reply is None:
            raise _err("not-granted", f"plugin `{self.plugin}` may not send HTTP requests to "
                       f"{authority}: add \"{authority}\" to [capabilities] http in "
                       f"{self.plugin}.toml (in a test: TestHost.http_reply or http_handler)")
        return _reply(reply)

    def _import_run_action(self, name: str) -> _native.ActionOutput:
        self._record("run-action", name)
        result = self._actions.get(name)
        if result is None:
            raise _err("not-granted", f"plugin `{self.plugin}` may not run action `{name}`: add "
                       f"\"{name}\" to [capabilities] actions in {self.plugin}.toml (in a test: "
                       "TestHost.action_result)")
        if isinstance(result, forewarn.HostError):
            raise _err(result.kind, result.detail)
        return result

    def _import_azure_access_token(self, resource: str) -> _native.AccessToken:
        self._record("azure-access-token", resource)
        result = self._tokens.get(resource)
        if result is None:
            raise _err("not-granted", f"plugin `{self.plugin}` may not ask for access tokens for "
                       f"`{resource}`: add \"{resource}\" to [capabilities] azure-identity in "
                       f"{self.plugin}.toml (in a test: TestHost.access_token)")
        if isinstance(result, forewarn.HostError):
            raise _err(result.kind, result.detail)
        return result


# Host calls outside TestHost.run go here: an empty host that grants nothing.
_current_host: Optional[TestHost] = None
_default_host = TestHost()


def current_host() -> TestHost:
    """The host answering host calls now: the one running the plugin, else an empty one."""
    return _current_host if _current_host is not None else _default_host


def _kind(kind: str) -> str:
    if kind not in _HOST_ERRORS and kind != "timed-out":
        raise ValueError(f"unknown host error kind {kind!r}: use one of "
                         "\"not-granted\", \"invalid\", \"failed\", \"timed-out\"")
    return kind


def _err(kind: str, detail: str) -> _native.Err:
    if kind == "timed-out":
        return _native.Err(_native.HostError_TimedOut())
    return _native.Err(_HOST_ERRORS[_kind(kind)](detail))


def _response(status: int, body: Union[bytes, str] = b"",
              headers: Optional[List[Tuple[str, str]]] = None) -> _native.HttpResponse:
    data = body.encode() if isinstance(body, str) else bytes(body)
    return _native.HttpResponse(status=int(status), headers=list(headers or []), body=data)


def _reply(reply: Reply) -> _native.HttpResponse:
    if isinstance(reply, forewarn.HostError):
        raise _err(reply.kind, reply.detail)
    if isinstance(reply, _native.HttpResponse):
        return reply
    if isinstance(reply, tuple):
        return _response(*reply)
    return _response(int(reply))


def _authority(url: str) -> str:
    """host:port of an absolute http(s) URL; raises Err(invalid) for anything else."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise _err("invalid", f"`{url}` is not an absolute URL: relative URL without a base")
    default_port = {"http": 80, "https": 443}.get(scheme.lower())
    if default_port is None:
        raise _err("invalid", f"`{url}`: scheme `{scheme}` is not supported; use http:// or https://")
    for stop in "/?#":
        rest = rest.split(stop, 1)[0]
    host_port = rest.rsplit("@", 1)[-1].lower()
    if not host_port:
        raise _err("invalid", f"`{url}` names no host")
    _, colon, port = host_port.rpartition(":")
    has_port = colon and port and "]" not in port
    return host_port if has_port else f"{host_port}:{default_port}"

"""forewarn — the Python SDK for forewarn plugins.

Write a module with one function, ``on_event(event, phase, ctx)``, that returns
``approve()`` or ``defer(reason, retry_after_ms)``, and build it with sdk/python/build.sh.
The module may also define ``on_start(ctx)``, called once per daemon run before any
``on_event``; without one the SDK's default does nothing. The host imports (log, config,
state, readiness, HTTP, actions, identity) are wrapped here as plain functions; a host error
is raised as ``HostError``. Native tests (pytest) run the same code against
``forewarn.testing.TestHost``. Targets forewarn:plugin@0.3.0 (plugins built against 0.1.0 keep
loading unchanged).
"""

import os
import sys
import traceback
from datetime import timedelta
from typing import Callable, List, Optional, Tuple

try:
    # Inside the component: the bindings componentize-py generates from wit/forewarn.wit.
    from componentize_py_types import Err
    from wit_world.imports import host as _host
    from wit_world.imports import types as _types

    _IN_COMPONENT = True
except ImportError:
    # Outside it (native tests with forewarn.testing): the same types, and host calls that go
    # to the current forewarn.testing.TestHost.
    from forewarn._native import Err
    from forewarn._native import host as _host
    from forewarn._native import types as _types

    _IN_COMPONENT = False

# The data a plugin receives (see wit/forewarn.wit for every field).
Event = _types.ScheduledEvent
EventType = _types.EventType
EventStatus = _types.EventStatus
EventSource = _types.EventSource
Phase = _types.Phase
Context = _types.Context
StartContext = _types.StartContext
VmInfo = _types.VmInfo
VmPriority = _types.VmPriority
EvictionPolicy = _types.EvictionPolicy
Decision = _types.Decision

__all__ = [
    "Event", "EventType", "EventStatus", "EventSource", "Phase", "Context", "StartContext",
    "VmInfo", "VmPriority", "EvictionPolicy", "Decision",
    "approve", "defer", "log", "config", "state", "set_ready", "drain_progress",
    "DrainStatus", "http", "run_action",
    "identity", "AccessToken", "HostError", "takes_vm_down", "handler",
]

# Deferral retry when the plugin does not say.
DEFAULT_RETRY_AFTER_MS = 5_000


def approve() -> Decision:
    """Ready: the maintenance may start as far as this plugin cares."""
    return _types.Decision_Approve()


def defer(reason: str, retry_after_ms: int = DEFAULT_RETRY_AFTER_MS) -> Decision:
    """Not yet: ask again after ``retry_after_ms`` milliseconds."""
    return _types.Decision_Defer(_types.Deferral(reason=reason, retry_after_ms=retry_after_ms))


def takes_vm_down(event: Event) -> bool:
    """Whether the event stops or removes the VM (everything but a Freeze)."""
    return event.event_type != EventType.FREEZE


def _is_evictable(vm: VmInfo) -> bool:
    """Whether Azure may evict this VM (a Spot or low-priority VM)."""
    return vm.priority in (VmPriority.SPOT, VmPriority.LOW)


def _eviction_deletes_disks(vm: VmInfo) -> bool:
    """Whether an eviction deletes the VM and its disks: a checkpoint must leave the VM
    before the Preempt's NotBefore."""
    return _is_evictable(vm) and vm.eviction_policy == EvictionPolicy.DELETE


def _until_not_before(ctx: Context) -> Optional[timedelta]:
    """Time from the start of this call to the event's NotBefore (zero when it has passed);
    None when the event has no NotBefore (it has started)."""
    ms = ctx.until_not_before_ms
    return None if ms is None else timedelta(milliseconds=ms)


# Helpers on the generated records, as in the Rust SDK: ctx.vm.is_evictable(),
# ctx.vm.eviction_deletes_disks(), ctx.until_not_before().
VmInfo.is_evictable = _is_evictable
VmInfo.eviction_deletes_disks = _eviction_deletes_disks
Context.until_not_before = _until_not_before


class HostError(Exception):
    """A host call did not do what was asked. ``kind`` is one of "not-granted",
    "invalid", "failed", "timed-out"; ``detail`` says more."""

    def __init__(self, call: str, kind: str, detail: str):
        super().__init__(f"{call}: {kind}: {detail}" if detail else f"{call}: {kind}")
        self.call, self.kind, self.detail = call, kind, detail


def _host_error(call: str, error: Err) -> HostError:
    value = error.value
    kinds = {
        _host.HostError_NotGranted: "not-granted",
        _host.HostError_Invalid: "invalid",
        _host.HostError_Failed: "failed",
        _host.HostError_TimedOut: "timed-out",
    }
    return HostError(call, kinds.get(type(value), "error"), getattr(value, "value", "") or "")


class log:
    """Lines in the daemon's log under this plugin's name."""

    @staticmethod
    def trace(message: str) -> None:
        _host.log(_host.Level.TRACE, message)

    @staticmethod
    def debug(message: str) -> None:
        _host.log(_host.Level.DEBUG, message)

    @staticmethod
    def info(message: str) -> None:
        _host.log(_host.Level.INFO, message)

    @staticmethod
    def warn(message: str) -> None:
        _host.log(_host.Level.WARN, message)

    @staticmethod
    def error(message: str) -> None:
        _host.log(_host.Level.ERROR, message)


def config(key: str, default: Optional[str] = None) -> Optional[str]:
    """A value from the manifest's [config] table, or ``default``."""
    value = _host.config(key)
    return default if value is None else value


class state:
    """This plugin's durable state: survives reloads and restarts."""

    @staticmethod
    def get(key: str) -> Optional[bytes]:
        return _host.state_get(key)

    @staticmethod
    def set(key: str, value: bytes) -> None:
        try:
            _host.state_set(key, value)
        except Err as error:
            raise _host_error("state-set", error) from None

    @staticmethod
    def delete(key: str) -> None:
        try:
            _host.state_delete(key)
        except Err as error:
            raise _host_error("state-delete", error) from None


def set_ready(ready: bool) -> None:
    """Marks this VM ready or not on /readyz (needs ``readiness = true``)."""
    try:
        _host.set_ready(ready)
    except Err as error:
        raise _host_error("set-ready", error) from None


class DrainStatus:
    """What the load balancers probing /readyz have seen since the VM was marked not ready:
    ``probers`` (probers of /readyz in the last minute; 0: none probes forewarn),
    ``probers_drained`` (answered 503 the threshold of times in a row), ``drained_for_ms``
    (since every prober has; None until then) and ``not_ready_for_ms`` (None while ready)."""

    def __init__(self, probers: int, probers_drained: int, drained_for_ms: Optional[int],
                 not_ready_for_ms: Optional[int]):
        self.probers = probers
        self.probers_drained = probers_drained
        self.drained_for_ms = drained_for_ms
        self.not_ready_for_ms = not_ready_for_ms

    def __repr__(self) -> str:
        return (f"DrainStatus(probers={self.probers}, probers_drained={self.probers_drained}, "
                f"drained_for_ms={self.drained_for_ms}, not_ready_for_ms={self.not_ready_for_ms})")


def drain_progress(unhealthy_threshold: int) -> DrainStatus:
    """Where a drain stands at load balancers that take a VM out after
    ``unhealthy_threshold`` failed probes in a row (their own setting, 1 to 16). Needs
    ``readiness = true``; forewarn:plugin@0.3.0."""
    try:
        progress = _host.drain_progress(unhealthy_threshold)
    except Err as error:
        raise _host_error("drain-progress", error) from None
    return DrainStatus(progress.probers, progress.probers_drained, progress.drained_for_ms,
                         progress.not_ready_for_ms)


class Response:
    """An HTTP response: ``status``, ``headers`` (list of pairs) and ``body`` (bytes)."""

    def __init__(self, status: int, headers: List[Tuple[str, str]], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class http:
    """Outbound HTTP to the hosts on the manifest's ``[capabilities] http`` allow-list."""

    @staticmethod
    def send(method: str, url: str, body: bytes = b"",
             headers: Optional[List[Tuple[str, str]]] = None) -> Response:
        request = _host.HttpRequest(method=method, url=url, headers=headers or [], body=body)
        try:
            response = _host.http_send(request)
        except Err as error:
            raise _host_error("http-send", error) from None
        return Response(response.status, response.headers, response.body)

    @staticmethod
    def get(url: str) -> Response:
        return http.send("GET", url)

    @staticmethod
    def post(url: str, body, content_type: str = "application/json") -> Response:
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        return http.send("POST", url, data, [("content-type", content_type)])


def run_action(name: str) -> _host.ActionOutput:
    """Runs an operator-defined action granted to this plugin (``exit_code``, ``stdout``, ``stderr``)."""
    try:
        return _host.run_action(name)
    except Err as error:
        raise _host_error("run-action", error) from None


class AccessToken:
    """An access token of the VM's managed identity: ``token``, ``expires_on_unix_ms``."""

    def __init__(self, token: str, expires_on_unix_ms: int):
        self.token, self.expires_on_unix_ms = token, expires_on_unix_ms

    def bearer(self) -> str:
        """The value of an ``Authorization`` header: ``Bearer <token>``."""
        return f"Bearer {self.token}"


class identity:
    """The VM's Azure managed identity (needs the resource in the manifest's
    ``[capabilities] azure-identity``)."""

    #: The resource of Azure Storage (blobs, queues, tables).
    STORAGE = "https://storage.azure.com/"

    @staticmethod
    def access_token(resource: str) -> AccessToken:
        """An access token for ``resource``. The host fetches it from the instance metadata
        service and caches it: ask again rather than keeping it."""
        try:
            token = _host.azure_access_token(resource)
        except Err as error:
            raise _host_error("azure-access-token", error) from None
        return AccessToken(token.token, token.expires_on_unix_ms)


def handler(on_event: Callable[[Event, Phase, Context], Decision],
            on_start: Optional[Callable[[StartContext], None]] = None):
    """Makes the component's ``Handler`` export from plain functions. An exception from
    ``on_event`` is the plugin's failure, like a Rust panic: inside the component the SDK
    prints the traceback and one line naming the exception and where it was raised
    (``plugin raised ValueError: boom at my_plugin.py:8, in on_event``) to stderr and aborts,
    so the daemon's failure policy applies (``plugin test`` says "trapped"). Native tests see
    the exception itself. Without ``on_start`` the export's default does nothing; an exception
    from it is logged."""
    if not callable(on_event):
        raise TypeError(
            "the plugin's on_event is not a function: define "
            "`def on_event(event, phase, ctx):` returning approve() or defer(...)"
        )

    class Handler:
        def on_start(self, ctx: StartContext) -> None:
            if on_start is None:
                return
            try:
                on_start(ctx)
            except Exception as error:  # logged, like the host logs a failed on-start
                log.error(f"on_start raised {type(error).__name__}: {error}")

        def on_event(self, event: Event, phase: Phase, ctx: Context) -> Decision:
            try:
                return on_event(event, phase, ctx)
            except BaseException as error:
                if not _IN_COMPONENT:
                    raise
                _crash(error)

    return Handler


def _crash(error: BaseException) -> None:
    """Ends the call the way a Rust panic does: the traceback, then the one line the daemon
    shows as the failure, on stderr; then abort (a trap)."""
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    where = _raised_at(traceback.extract_tb(error.__traceback__))
    print(f"plugin raised {type(error).__name__}: {error}{where}", file=sys.stderr, flush=True)
    os.abort()


def _raised_at(frames) -> str:
    """" at FILE:LINE, in FUNCTION" for the innermost frame of the plugin's own code (not the
    SDK's, not the standard library's); empty when there is none."""
    sdk = os.path.dirname(os.path.abspath(__file__))
    stdlib = os.path.dirname(os.__file__)
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename)
        if path.startswith(sdk + os.sep) or path.startswith(stdlib + os.sep):
            continue
        return f" at {os.path.basename(path)}:{frame.lineno}, in {frame.name}"
    return ""

"""forewarn._native — the SDK's bindings outside the component (native tests).

Inside the component, componentize-py generates ``wit_world.imports.types``/``host`` and
``componentize_py_types`` from wit/forewarn.wit. Outside it (pytest), those modules do not
exist, so ``forewarn`` imports these mirrors instead: the same records, enums and variants as
plain dataclasses, and host functions that call the test host of ``forewarn.testing``.
Field names and order follow the generated bindings; ``sdk/python/tests`` checks them against
a fresh ``componentize-py bindings`` run when componentize-py is installed.
"""

from dataclasses import dataclass
from enum import Enum
from types import SimpleNamespace
from typing import Any, List, Optional, Tuple, Union


@dataclass(frozen=True)
class Err(Exception):
    """The failure case of a WIT ``result``, raised by a host call (as componentize-py does)."""

    value: Any


# ---- forewarn:plugin/types ----

class EventType(Enum):
    FREEZE = 0
    REBOOT = 1
    REDEPLOY = 2
    PREEMPT = 3
    TERMINATE = 4
    SHUTDOWN = 5
    UNKNOWN = 6


class EventStatus(Enum):
    SCHEDULED = 0
    STARTED = 1


class EventSource(Enum):
    PLATFORM = 0
    USER = 1
    OPERATING_SYSTEM = 2
    UNKNOWN = 3


@dataclass
class ScheduledEvent:
    id: str
    event_type: EventType
    event_type_raw: str
    resource_type: str
    resources: List[str]
    status: EventStatus
    not_before_unix_ms: Optional[int]
    description: str
    source: EventSource
    duration_seconds: Optional[int]


class VmPriority(Enum):
    REGULAR = 0
    SPOT = 1
    LOW = 2
    UNKNOWN = 3


class EvictionPolicy(Enum):
    DEALLOCATE = 0
    DELETE = 1
    UNKNOWN = 2


@dataclass
class VmInfo:
    priority: VmPriority
    eviction_policy: Optional[EvictionPolicy]


class Phase(Enum):
    PREPARE = 0
    STARTED = 1
    ENDED_AFTER_START = 2
    ENDED_WITHOUT_START = 3


@dataclass
class Context:
    vm_name: str
    affects_this_vm: bool
    deadline_unix_ms: int
    attempt: int
    until_not_before_ms: Optional[int]
    vm: VmInfo


@dataclass
class StartContext:
    vm_name: str
    vm: VmInfo
    first_run: bool
    deadline_unix_ms: int


@dataclass
class Deferral:
    reason: str
    retry_after_ms: int


@dataclass
class Decision_Approve:
    pass


@dataclass
class Decision_Defer:
    value: Deferral


Decision = Union[Decision_Approve, Decision_Defer]

types = SimpleNamespace(
    EventType=EventType, EventStatus=EventStatus, EventSource=EventSource,
    ScheduledEvent=ScheduledEvent, VmPriority=VmPriority, EvictionPolicy=EvictionPolicy,
    VmInfo=VmInfo, Phase=Phase, Context=Context, StartContext=StartContext, Deferral=Deferral,
    Decision_Approve=Decision_Approve, Decision_Defer=Decision_Defer, Decision=Decision,
)


# ---- forewarn:plugin/host ----

class Level(Enum):
    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


@dataclass
class HostError_NotGranted:
    value: str


@dataclass
class HostError_Invalid:
    value: str


@dataclass
class HostError_Failed:
    value: str


@dataclass
class HostError_TimedOut:
    pass


@dataclass
class HttpRequest:
    method: str
    url: str
    headers: List[Tuple[str, str]]
    body: bytes


@dataclass
class HttpResponse:
    status: int
    headers: List[Tuple[str, str]]
    body: bytes


@dataclass
class ActionOutput:
    exit_code: Optional[int]
    stdout: str
    stderr: str


@dataclass
class DrainStatus:
    probers: int
    probers_drained: int
    drained_for_ms: Optional[int]
    not_ready_for_ms: Optional[int]


@dataclass
class AccessToken:
    token: str
    expires_on_unix_ms: int


def _current():
    # Imported here: forewarn.testing imports forewarn, which imports this module.
    from forewarn import testing
    return testing.current_host()


def _call(name: str, *args):
    return getattr(_current(), "_import_" + name)(*args)


host = SimpleNamespace(
    Level=Level, HostError_NotGranted=HostError_NotGranted, HostError_Invalid=HostError_Invalid,
    HostError_Failed=HostError_Failed, HostError_TimedOut=HostError_TimedOut,
    HttpRequest=HttpRequest, HttpResponse=HttpResponse, ActionOutput=ActionOutput,
    AccessToken=AccessToken, DrainStatus=DrainStatus,
    log=lambda level, message: _call("log", level, message),
    config=lambda key: _call("config", key),
    state_get=lambda key: _call("state_get", key),
    state_set=lambda key, value: _call("state_set", key, value),
    state_delete=lambda key: _call("state_delete", key),
    set_ready=lambda ready: _call("set_ready", ready),
    drain_progress=lambda threshold: _call("drain_progress", threshold),
    http_send=lambda request: _call("http_send", request),
    azure_access_token=lambda resource: _call("azure_access_token", resource),
    run_action=lambda name: _call("run_action", name),
)

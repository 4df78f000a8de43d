"""Native tests of {{name}} (pytest, through ./test.sh): forewarn.testing.TestHost stands in for
the daemon and records every host call the plugin makes."""

import pytest

from forewarn import EventType, Phase, approve
from forewarn.testing import Call, TestHost, context, event

import {{name_snake}} as plugin


def test_prepare_reads_the_greeting_and_approves():
    host = TestHost("{{name}}").config("greeting", "hi")
    decision = host.on_event(plugin, event(EventType.REBOOT), Phase.PREPARE)
    assert decision == approve()
    assert Call("config", ("greeting",)) in host.calls
    assert len(host.logs) == 1
    assert host.effects == []  # no state, HTTP, actions or readiness changes


@pytest.mark.parametrize("phase", list(Phase))
def test_every_phase_is_answered(phase):
    host = TestHost("{{name}}")
    assert host.on_event(plugin, event(EventType.FREEZE), phase) == approve()


def test_events_for_other_vms_are_approved_without_work():
    host = TestHost("{{name}}")
    other = event(EventType.REBOOT, resources=["another-vm"])
    assert host.on_event(plugin, other, Phase.PREPARE, context(affects_this_vm=False)) == approve()
    assert host.calls == []


def test_on_start_makes_no_changes():
    host = TestHost("{{name}}")
    host.on_start(plugin)
    assert host.effects == []

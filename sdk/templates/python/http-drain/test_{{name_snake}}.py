"""Native tests of {{name}} (pytest, through ./test.sh): forewarn.testing.TestHost stands in for
the daemon (the readiness grant, the drain service's answers) and records every host call the
plugin makes."""

import json

import pytest

from forewarn import EventType, Phase, approve
from forewarn.testing import EVENT_ID, TestHost, context, event

import {{name_snake}} as plugin

DRAIN_URL = "http://127.0.0.1:9000/drain"


def host() -> TestHost:
    """A host that grants readiness and has drain-url configured."""
    return TestHost("{{name}}").ready().config("drain-url", DRAIN_URL)


def reason(decision) -> str:
    return getattr(getattr(decision, "value", None), "reason", "")


def test_prepare_takes_the_vm_out_of_rotation_posts_to_the_drain_url_and_approves():
    h = host().http_reply("POST", DRAIN_URL, 200)
    assert h.on_event(plugin, event(EventType.REBOOT), Phase.PREPARE) == approve()
    assert h.is_ready is False  # out of rotation
    [sent] = h.http_requests
    assert (sent.method, sent.url) == ("POST", DRAIN_URL)
    assert json.loads(sent.body) == {"event_id": EVENT_ID, "event_type": "reboot"}
    # Out of rotation first, then the service is told.
    assert [call.name for call in h.effects] == ["set-ready", "http-send"]


def test_an_error_answer_defers_and_keeps_the_vm_out_of_rotation():
    h = host().http_reply("POST", DRAIN_URL, 503, "busy")
    decision = h.on_event(plugin, event(EventType.REDEPLOY), Phase.PREPARE)
    assert reason(decision) == f"the drain at {DRAIN_URL} answered 503"
    assert h.is_ready is False


def test_an_unreachable_service_defers_with_the_reason():
    h = host().http_error("POST", DRAIN_URL, "failed", "connection refused")
    decision = h.on_event(plugin, event(EventType.REBOOT), Phase.PREPARE)
    assert reason(decision) == f"the drain at {DRAIN_URL}: failed: connection refused"


def test_without_the_readiness_grant_it_defers_before_telling_the_service():
    h = TestHost("{{name}}").http_reply("POST", plugin.DRAIN_URL_DEFAULT, 200)
    decision = h.on_event(plugin, event(EventType.REBOOT), Phase.PREPARE)
    assert "add `readiness = true` under [capabilities]" in reason(decision)
    assert h.http_requests == []


@pytest.mark.parametrize("end", [Phase.ENDED_AFTER_START, Phase.ENDED_WITHOUT_START])
def test_the_end_of_the_event_puts_the_vm_back_in_rotation(end):
    h = host().http_reply("POST", DRAIN_URL, 204)
    reboot = event(EventType.REBOOT)
    h.on_event(plugin, reboot, Phase.PREPARE)
    h.on_event(plugin, reboot, Phase.STARTED)
    assert h.is_ready is False  # still out of rotation while it runs
    assert h.on_event(plugin, reboot, end) == approve()
    assert h.is_ready is True


def test_events_for_other_vms_change_nothing():
    h = host()
    other = event(EventType.REBOOT, resources=["another-vm"])
    for phase in (Phase.PREPARE, Phase.ENDED_AFTER_START):
        assert h.on_event(plugin, other, phase, context(affects_this_vm=False)) == approve()
    assert h.effects == []

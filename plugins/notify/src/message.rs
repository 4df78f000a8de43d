//! What notify says: the one-line text of a notice, the Slack and Teams bodies around it,
//! and each event field as the webhook template shows it (pure, tested natively).

use forewarn_sdk::{Context, Event, EventSource, EventStatus};

use crate::logic::Transition;
use crate::outcome::Outcome;
use crate::template::{Field, json_string};

/// How many characters of an event id the text shows before "…".
const SHORT_ID_CHARS: usize = 8;

/// Everything one notice is made of: the event as IMDS described it, the VM, the transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notice {
    pub(crate) transition: Transition,
    /// A `scheduled` notice for an event announced before with another NotBefore.
    pub(crate) rescheduled: bool,
    pub(crate) vm_name: String,
    pub(crate) event: Event,
    /// What the event cost, for an `ended` notice when `outcome-url` is set.
    pub(crate) outcome: Option<Outcome>,
}

impl Notice {
    pub(crate) fn new(event: &Event, ctx: &Context, transition: Transition) -> Notice {
        Notice {
            transition,
            rescheduled: false,
            vm_name: ctx.vm_name.clone(),
            event: event.clone(),
            outcome: None,
        }
    }

    /// The one-line text: "forewarn on vm-1: Reboot 1C2D3E4F… scheduled, not before
    /// 2026-11-23T12:00:00Z (platform: Host update)".
    pub(crate) fn text(&self) -> String {
        format!(
            "forewarn on {}: {} {} {} ({})",
            self.vm_name,
            self.event_type(),
            short_id(&self.event.id),
            self.what_happened(),
            self.origin()
        )
    }

    fn what_happened(&self) -> String {
        let scheduled = if self.rescheduled {
            "rescheduled"
        } else {
            "scheduled"
        };
        match (self.transition, self.not_before()) {
            (Transition::Scheduled, Some(at)) => format!("{scheduled}, not before {at}"),
            (Transition::Scheduled, None) => scheduled.to_owned(),
            (Transition::Started, _) => match self.event.duration() {
                Some(length) if length.as_secs() > 0 => {
                    format!("started, for about {} s", length.as_secs())
                }
                _ => "started".to_owned(),
            },
            (Transition::Ended, _) => match &self.outcome {
                Some(outcome) if !outcome.verdict.is_empty() => {
                    format!("ended — {}", outcome.verdict)
                }
                _ => "ended".to_owned(),
            },
            (Transition::Canceled, _) => "canceled before it started".to_owned(),
        }
    }

    /// "platform: <description>", or just "platform" when IMDS gave no description.
    fn origin(&self) -> String {
        let source = self.event.source.as_str();
        match self.event.description.trim() {
            "" => source.to_owned(),
            description => format!("{source}: {description}"),
        }
    }

    /// The type as IMDS spelled it ("Reboot"), or its WIT name when IMDS gave none.
    fn event_type(&self) -> String {
        match self.event.event_type_raw.trim() {
            "" => self.event.event_type.as_str().to_owned(),
            raw => raw.to_owned(),
        }
    }

    fn not_before(&self) -> Option<String> {
        self.event
            .not_before_unix_ms
            .map(forewarn_sdk::time::rfc3339)
    }

    /// The value of `field` for the webhook template (not yet JSON-escaped).
    pub(crate) fn field(&self, field: Field) -> String {
        let event = &self.event;
        match field {
            Field::EventId => event.id.clone(),
            Field::EventType => self.event_type(),
            Field::EventStatus => imds_status(event.status).to_owned(),
            Field::NotBefore => self.not_before().unwrap_or_default(),
            Field::Resources => event.resources.join(", "),
            Field::Description => event.description.clone(),
            Field::EventSource => imds_source(event.source).to_owned(),
            Field::DurationInSeconds => event.duration_seconds.unwrap_or(-1).to_string(),
            Field::Transition => self.transition.as_str().to_owned(),
            Field::VmName => self.vm_name.clone(),
            Field::Message => self.text(),
            Field::Verdict => self
                .outcome
                .as_ref()
                .map(|o| o.verdict.clone())
                .unwrap_or_default(),
            Field::MeasuredImpact => self
                .outcome
                .as_ref()
                .map(|o| o.measured.clone())
                .unwrap_or_default(),
        }
    }
}

/// A Slack incoming webhook's body: `{"text":"…"}`.
pub(crate) fn slack_body(text: &str) -> String {
    format!("{{\"text\":{}}}", json_string(text))
}

/// The body a Teams workflow "Post to a channel when a webhook request is received" takes:
/// a message with one Adaptive Card holding the text.
pub(crate) fn teams_body(text: &str) -> String {
    format!(
        concat!(
            r#"{{"type":"message","attachments":[{{"contentType":"application/vnd.microsoft.card.adaptive","#,
            r#""content":{{"type":"AdaptiveCard","version":"1.4","body":[{{"type":"TextBlock","text":{},"wrap":true}}]}}}}]}}"#
        ),
        json_string(text)
    )
}

/// The first characters of `id`, with "…" when there is more.
fn short_id(id: &str) -> String {
    let mut chars = id.chars();
    let shown: String = chars.by_ref().take(SHORT_ID_CHARS).collect();
    match chars.next() {
        Some(_) => format!("{shown}…"),
        None => shown,
    }
}

/// IMDS's spelling of a status.
fn imds_status(status: EventStatus) -> &'static str {
    match status {
        EventStatus::Scheduled => "Scheduled",
        EventStatus::Started => "Started",
    }
}

/// IMDS's spelling of a source.
fn imds_source(source: EventSource) -> &'static str {
    match source {
        EventSource::Platform => "Platform",
        EventSource::User => "User",
        EventSource::OperatingSystem => "OperatingSystem",
        EventSource::Unknown => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use forewarn_sdk::EventType;

    use super::*;

    fn reboot() -> Event {
        Event {
            id: "1C2D3E4F-AAAA-BBBB-CCCC-000000000001".into(),
            event_type: EventType::Reboot,
            event_type_raw: "Reboot".into(),
            resource_type: "VirtualMachine".into(),
            resources: vec!["vm-1".into(), "vm-2".into()],
            status: EventStatus::Scheduled,
            // 2026-11-23T12:00:00Z
            not_before_unix_ms: Some(1_795_435_200_000),
            description: "Host update".into(),
            source: EventSource::Platform,
            duration_seconds: Some(-1),
        }
    }

    fn notice(transition: Transition) -> Notice {
        Notice {
            transition,
            rescheduled: false,
            vm_name: "vm-1".into(),
            event: reboot(),
            outcome: None,
        }
    }

    #[test]
    fn the_text_names_vm_type_id_transition_and_origin() {
        assert_eq!(
            notice(Transition::Scheduled).text(),
            "forewarn on vm-1: Reboot 1C2D3E4F… scheduled, not before 2026-11-23T12:00:00Z (platform: Host update)"
        );
        let mut moved = notice(Transition::Scheduled);
        moved.rescheduled = true;
        assert_eq!(
            moved.text(),
            "forewarn on vm-1: Reboot 1C2D3E4F… rescheduled, not before 2026-11-23T12:00:00Z (platform: Host update)"
        );
        assert_eq!(moved.field(Field::Transition), "scheduled");
        assert_eq!(
            notice(Transition::Ended).text(),
            "forewarn on vm-1: Reboot 1C2D3E4F… ended (platform: Host update)"
        );
        assert_eq!(
            notice(Transition::Canceled).text(),
            "forewarn on vm-1: Reboot 1C2D3E4F… canceled before it started (platform: Host update)"
        );
    }

    #[test]
    fn the_text_copes_with_missing_facts() {
        let mut bare = notice(Transition::Scheduled);
        bare.event.not_before_unix_ms = None;
        bare.event.description = " ".into();
        bare.event.event_type_raw = String::new();
        bare.event.id = "short".into();
        bare.event.source = EventSource::User;
        assert_eq!(
            bare.text(),
            "forewarn on vm-1: reboot short scheduled (user)"
        );
    }

    #[test]
    fn a_start_says_how_long_when_imds_said() {
        let mut started = notice(Transition::Started);
        assert!(
            started.text().contains(" started (platform"),
            "{}",
            started.text()
        );
        started.event.duration_seconds = Some(9);
        assert!(started.text().contains(" started, for about 9 s ("));
    }

    #[test]
    fn slack_and_teams_bodies_wrap_the_escaped_text() {
        assert_eq!(slack_body("a \"b\"\n"), r#"{"text":"a \"b\"\n"}"#);
        let teams = teams_body("hi");
        assert_eq!(
            teams,
            r#"{"type":"message","attachments":[{"contentType":"application/vnd.microsoft.card.adaptive","content":{"type":"AdaptiveCard","version":"1.4","body":[{"type":"TextBlock","text":"hi","wrap":true}]}}]}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&teams_body("x\"y")).unwrap();
        assert_eq!(
            parsed["attachments"][0]["content"]["body"][0]["text"],
            "x\"y"
        );
    }

    #[test]
    fn fields_use_imds_spellings() {
        let scheduled = notice(Transition::Scheduled);
        assert_eq!(scheduled.field(Field::EventType), "Reboot");
        assert_eq!(scheduled.field(Field::EventStatus), "Scheduled");
        assert_eq!(scheduled.field(Field::EventSource), "Platform");
        assert_eq!(scheduled.field(Field::NotBefore), "2026-11-23T12:00:00Z");
        assert_eq!(scheduled.field(Field::Resources), "vm-1, vm-2");
        assert_eq!(scheduled.field(Field::DurationInSeconds), "-1");
        assert_eq!(scheduled.field(Field::Transition), "scheduled");
        assert_eq!(scheduled.field(Field::VmName), "vm-1");
        let mut started = notice(Transition::Started);
        started.event.not_before_unix_ms = None;
        started.event.duration_seconds = None;
        assert_eq!(started.field(Field::NotBefore), "");
        assert_eq!(started.field(Field::DurationInSeconds), "-1");
    }
}

//! notify's decisions as pure functions: its settings from config, which transition a call
//! is, the request for each target, how long to wait before a retry, and what was sent.

use std::time::Duration;

use forewarn_sdk::{Context, Phase};
use thiserror::Error;

use crate::message::{Notice, slack_body, teams_body};
use crate::template::{DEFAULT_TEMPLATE, Template, TemplateError};

/// The transitions sent unless `transitions` says otherwise.
const ALL_TRANSITIONS: &str = "scheduled,started,ended,canceled";
/// How many times one notice is tried at one target, the first try included.
const MAX_TRIES: u32 = 4;
/// The wait before the first retry; it doubles on each retry after.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Time kept free before the call's deadline: a retry starts only if its wait leaves this
/// much for the request and the answer.
const RESERVE: Duration = Duration::from_secs(1);

/// A change in an event's life that notify can report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Transition {
    /// The event is announced (or rescheduled): the first prepare call for its NotBefore.
    Scheduled,
    /// The maintenance has begun.
    Started,
    /// The maintenance is over.
    Ended,
    /// The event went away without starting.
    Canceled,
}

impl Transition {
    const ALL: [Transition; 4] = [
        Transition::Scheduled,
        Transition::Started,
        Transition::Ended,
        Transition::Canceled,
    ];

    /// The name used in `transitions` and in the `{{Transition}}` placeholder.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Transition::Scheduled => "scheduled",
            Transition::Started => "started",
            Transition::Ended => "ended",
            Transition::Canceled => "canceled",
        }
    }

    /// The transition a call in `phase` reports.
    pub(crate) fn of_phase(phase: Phase) -> Transition {
        match phase {
            Phase::Prepare => Transition::Scheduled,
            Phase::Started => Transition::Started,
            Phase::EndedAfterStart => Transition::Ended,
            Phase::EndedWithoutStart => Transition::Canceled,
        }
    }

    /// Whether the event is over after this transition (its sent marks can go).
    pub(crate) fn is_final(self) -> bool {
        matches!(self, Transition::Ended | Transition::Canceled)
    }

    fn parse(name: &str) -> Result<Transition, ConfigError> {
        let name = name.trim().to_ascii_lowercase();
        if name == "approved" {
            return Err(ConfigError::ApprovalNotVisible);
        }
        Transition::ALL
            .into_iter()
            .find(|transition| transition.as_str() == name)
            .ok_or(ConfigError::UnknownTransition { name })
    }
}

/// What is wrong with notify's `[config]`. Each message names the key and the fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum ConfigError {
    #[error(
        "notify config `transitions`: unknown transition `{name}`; name any of scheduled, started, ended, canceled, comma-separated"
    )]
    UnknownTransition { name: String },
    #[error(
        "notify config `transitions`: `approved` cannot be sent: plugins answer before the daemon approves, so notify never sees the approval; remove it (the daemon logs each approval)"
    )]
    ApprovalNotVisible,
    #[error(
        "notify config `transitions` names no transition; remove the key to send all four, or name some of scheduled, started, ended, canceled"
    )]
    NoTransitions,
    #[error("notify config `{key}` = \"{value}\" is neither true nor false")]
    NotABoolean { key: &'static str, value: String },
    #[error(
        "notify config `{key}` = \"{value}\" is not an https:// (or http://) URL; copy the whole URL the webhook was created with"
    )]
    NotAUrl { key: &'static str, value: String },
    #[error("notify config `webhook-template`: {0}")]
    Template(#[from] TemplateError),
    #[error(
        "notify config `webhook-headers`: line `{line}` is not `Name: value`; write one header per line"
    )]
    BadHeader { line: String },
}

/// Where a notice goes, and in which shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// A Slack incoming webhook: `{"text": …}`.
    Slack,
    /// A Teams workflow webhook: an Adaptive Card message.
    Teams,
    /// Any JSON webhook: the template, with extra headers.
    Webhook {
        template: Template,
        headers: Vec<(String, String)>,
    },
}

/// One configured target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) kind: TargetKind,
    pub(crate) url: String,
}

impl Target {
    /// The target's name in the log: "slack", "teams" or "webhook".
    pub(crate) fn name(&self) -> &'static str {
        match self.kind {
            TargetKind::Slack => "slack",
            TargetKind::Teams => "teams",
            TargetKind::Webhook { .. } => "webhook",
        }
    }

    /// The headers and body of the POST that tells this target about `notice`.
    pub(crate) fn request(&self, notice: &Notice) -> (Vec<(String, String)>, String) {
        let json = ("content-type".to_owned(), "application/json".to_owned());
        match &self.kind {
            TargetKind::Slack => (vec![json], slack_body(&notice.text())),
            TargetKind::Teams => (vec![json], teams_body(&notice.text())),
            TargetKind::Webhook { template, headers } => {
                let mut all = vec![json];
                all.extend(headers.iter().cloned());
                (all, template.render(|field| notice.field(field)))
            }
        }
    }
}

/// notify's configuration (the `[config]` table of `notify.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Report only events whose Resources name this VM (`affects-only-this-vm`).
    pub(crate) affects_only_this_vm: bool,
    /// The transitions to send, in no particular order.
    pub(crate) transitions: Vec<Transition>,
    /// Slack, then Teams, then the generic webhook: those configured.
    pub(crate) targets: Vec<Target>,
    /// The daemon's `/status/events` (`outcome-url`): the `ended` notice then says what the
    /// event cost (its outcome record's verdict and measured impact).
    pub(crate) outcome_url: Option<String>,
}

impl Settings {
    /// Reads the settings through `lookup` (the `config` host call); a blank value counts
    /// as unset.
    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let value = |key: &str| lookup(key).filter(|value| !value.trim().is_empty());
        let affects_only_this_vm = match value("affects-only-this-vm") {
            None => true,
            Some(text) => parse_bool("affects-only-this-vm", &text)?,
        };
        let transitions =
            parse_transitions(&value("transitions").unwrap_or_else(|| ALL_TRANSITIONS.into()))?;
        let mut targets = Vec::new();
        if let Some(url) = value("slack-webhook-url") {
            targets.push(target(TargetKind::Slack, "slack-webhook-url", url)?);
        }
        if let Some(url) = value("teams-webhook-url") {
            targets.push(target(TargetKind::Teams, "teams-webhook-url", url)?);
        }
        if let Some(url) = value("webhook-url") {
            let template = Template::parse(
                value("webhook-template")
                    .as_deref()
                    .unwrap_or(DEFAULT_TEMPLATE),
            )?;
            let headers = parse_headers(&value("webhook-headers").unwrap_or_default())?;
            let kind = TargetKind::Webhook { template, headers };
            targets.push(target(kind, "webhook-url", url)?);
        }
        let outcome_url = match value("outcome-url") {
            Some(url) => Some(checked_url("outcome-url", url)?),
            None => None,
        };
        Ok(Settings {
            affects_only_this_vm,
            transitions,
            targets,
            outcome_url,
        })
    }

    /// What to send for this call: the transition, unless it is not wanted, the event does
    /// not concern this VM, or there is no target.
    pub(crate) fn wanted(&self, phase: Phase, ctx: &Context) -> Option<Transition> {
        let transition = Transition::of_phase(phase);
        let concerned = ctx.affects_this_vm || !self.affects_only_this_vm;
        let wanted = concerned && !self.targets.is_empty();
        (wanted && self.transitions.contains(&transition)).then_some(transition)
    }
}

fn target(kind: TargetKind, key: &'static str, url: String) -> Result<Target, ConfigError> {
    Ok(Target {
        kind,
        url: checked_url(key, url)?,
    })
}

/// `url` trimmed, when it is an http(s) URL.
fn checked_url(key: &'static str, url: String) -> Result<String, ConfigError> {
    let url = url.trim().to_owned();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(ConfigError::NotAUrl { key, value: url });
    }
    Ok(url)
}

fn parse_bool(key: &'static str, text: &str) -> Result<bool, ConfigError> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::NotABoolean {
            key,
            value: text.to_owned(),
        }),
    }
}

fn parse_transitions(text: &str) -> Result<Vec<Transition>, ConfigError> {
    let mut transitions = Vec::new();
    for name in text.split(',').filter(|name| !name.trim().is_empty()) {
        let transition = Transition::parse(name)?;
        if !transitions.contains(&transition) {
            transitions.push(transition);
        }
    }
    if transitions.is_empty() {
        return Err(ConfigError::NoTransitions);
    }
    Ok(transitions)
}

/// `Name: value` lines; blank lines are skipped.
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut headers = Vec::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let bad = || ConfigError::BadHeader {
            line: line.to_owned(),
        };
        let (name, value) = line.split_once(':').ok_or_else(bad)?;
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(bad());
        }
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(headers)
}

/// Whether `byte` may stand in an HTTP header name (RFC 9110 `tchar`).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// How long to wait before trying again after `failures` failed tries, with `time_left`
/// before the call's deadline; `None` to give up (tries used up, or no time for another).
pub(crate) fn next_retry(failures: u32, time_left: Duration) -> Option<Duration> {
    if failures == 0 || failures >= MAX_TRIES {
        return None;
    }
    let wait = backoff(failures);
    (time_left >= wait + RESERVE).then_some(wait)
}

/// The wait before retry number `retry` (1 for the first): 200 ms, 400 ms, 800 ms, then 1 s.
fn backoff(retry: u32) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1));
    FIRST_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
}

/// The mark that says a notice was sent (or tried) for an event: the transition, and for
/// `scheduled` the NotBefore it announced, so that a reschedule is reported again.
pub(crate) fn sent_mark(transition: Transition, not_before_unix_ms: Option<u64>) -> String {
    match (transition, not_before_unix_ms) {
        (Transition::Scheduled, Some(at)) => format!("scheduled@{at}"),
        (transition, _) => transition.as_str().to_owned(),
    }
}

/// The marks of what was sent for one event, stored as one mark a line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SentMarks(Vec<String>);

impl SentMarks {
    pub(crate) fn parse(text: &str) -> SentMarks {
        SentMarks(text.lines().map(str::to_owned).collect())
    }

    pub(crate) fn render(&self) -> String {
        self.0.join("\n")
    }

    pub(crate) fn contains(&self, mark: &str) -> bool {
        self.0.iter().any(|sent| sent == mark)
    }

    pub(crate) fn insert(&mut self, mark: String) {
        if !self.contains(&mark) {
            self.0.push(mark);
        }
    }

    /// Whether a `scheduled` notice went out before (for another NotBefore, or none).
    pub(crate) fn was_scheduled(&self) -> bool {
        self.0.iter().any(|sent| sent.starts_with("scheduled"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_lookup(|key| map.get(key).cloned())
    }

    fn ctx(affects_this_vm: bool) -> Context {
        Context {
            vm_name: "vm-1".into(),
            affects_this_vm,
            deadline_unix_ms: 0,
            attempt: 1,
            until_not_before_ms: None,
            vm: Default::default(),
        }
    }

    const SLACK: (&str, &str) = (
        "slack-webhook-url",
        "https://hooks.slack.com/services/T/B/x",
    );

    #[test]
    fn defaults_send_every_transition_for_this_vm_only_and_nothing_without_targets() {
        let bare = settings(&[]).unwrap();
        assert!(bare.affects_only_this_vm);
        assert_eq!(bare.transitions, Transition::ALL.to_vec());
        assert!(bare.targets.is_empty());
        assert_eq!(bare.wanted(Phase::Prepare, &ctx(true)), None);
        let slack = settings(&[SLACK]).unwrap();
        assert_eq!(
            slack.wanted(Phase::Prepare, &ctx(true)),
            Some(Transition::Scheduled)
        );
        assert_eq!(
            slack.wanted(Phase::EndedWithoutStart, &ctx(true)),
            Some(Transition::Canceled)
        );
        assert_eq!(slack.wanted(Phase::Started, &ctx(false)), None);
        let everyone = settings(&[SLACK, ("affects-only-this-vm", "false")]).unwrap();
        assert_eq!(
            everyone.wanted(Phase::Started, &ctx(false)),
            Some(Transition::Started)
        );
    }

    #[test]
    fn transitions_are_chosen_by_name() {
        let some = settings(&[SLACK, ("transitions", " Started, ended,started ")]).unwrap();
        assert_eq!(some.transitions, [Transition::Started, Transition::Ended]);
        assert_eq!(some.wanted(Phase::Prepare, &ctx(true)), None);
        assert_eq!(
            some.wanted(Phase::EndedAfterStart, &ctx(true)),
            Some(Transition::Ended)
        );
    }

    #[test]
    fn bad_transitions_are_named_with_the_fix() {
        let unknown = settings(&[("transitions", "scheduled,strated")]).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "notify config `transitions`: unknown transition `strated`; name any of scheduled, started, ended, canceled, comma-separated"
        );
        let approved = settings(&[("transitions", "approved")]).unwrap_err();
        assert_eq!(approved, ConfigError::ApprovalNotVisible);
        assert!(approved.to_string().contains("remove it"), "{approved}");
        assert_eq!(
            settings(&[("transitions", " , ")]).unwrap_err(),
            ConfigError::NoTransitions
        );
    }

    #[test]
    fn targets_come_in_a_fixed_order_and_need_urls() {
        let all = settings(&[
            ("webhook-url", "https://example.com/hook"),
            (
                "teams-webhook-url",
                "https://prod-00.westeurope.logic.azure.com/x",
            ),
            SLACK,
        ])
        .unwrap();
        let names: Vec<_> = all.targets.iter().map(Target::name).collect();
        assert_eq!(names, ["slack", "teams", "webhook"]);
        let error = settings(&[("slack-webhook-url", "hooks.slack.com/x")]).unwrap_err();
        assert_eq!(
            error,
            ConfigError::NotAUrl {
                key: "slack-webhook-url",
                value: "hooks.slack.com/x".into()
            }
        );
        let flag = settings(&[("affects-only-this-vm", "yes")]).unwrap_err();
        assert!(
            flag.to_string()
                .contains("`affects-only-this-vm` = \"yes\"")
        );
    }

    #[test]
    fn the_webhook_template_and_headers_are_checked() {
        let error = settings(&[
            ("webhook-url", "http://127.0.0.1:9/x"),
            ("webhook-template", "{{Nope}}"),
        ])
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("notify config `webhook-template`: unknown placeholder(s) {{Nope}}"),
            "{error}"
        );
        let parsed = settings(&[
            ("webhook-url", "http://127.0.0.1:9/x"),
            (
                "webhook-headers",
                "Authorization: Bearer a:b\n\n X-Env : prod \n",
            ),
        ])
        .unwrap();
        let TargetKind::Webhook { headers, .. } = &parsed.targets[0].kind else {
            panic!("a webhook target: {parsed:?}");
        };
        assert_eq!(
            headers,
            &[
                ("Authorization".to_owned(), "Bearer a:b".to_owned()),
                ("X-Env".to_owned(), "prod".to_owned())
            ]
        );
        let bad = settings(&[
            ("webhook-url", "http://127.0.0.1:9/x"),
            ("webhook-headers", "Bad Name: x"),
        ]);
        assert_eq!(
            bad.unwrap_err(),
            ConfigError::BadHeader {
                line: "Bad Name: x".into()
            }
        );
    }

    #[test]
    fn retries_back_off_and_stop_when_tries_or_time_run_out() {
        let plenty = Duration::from_secs(5);
        assert_eq!(next_retry(0, plenty), None);
        assert_eq!(next_retry(1, plenty), Some(Duration::from_millis(200)));
        assert_eq!(next_retry(2, plenty), Some(Duration::from_millis(400)));
        assert_eq!(next_retry(3, plenty), Some(Duration::from_millis(800)));
        assert_eq!(next_retry(4, plenty), None);
        assert_eq!(next_retry(1, Duration::from_millis(1_199)), None);
        assert_eq!(
            next_retry(1, Duration::from_millis(1_200)),
            Some(Duration::from_millis(200))
        );
        assert_eq!(backoff(5), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn a_scheduled_mark_carries_its_not_before() {
        assert_eq!(sent_mark(Transition::Scheduled, Some(7)), "scheduled@7");
        assert_eq!(sent_mark(Transition::Scheduled, None), "scheduled");
        assert_eq!(sent_mark(Transition::Ended, Some(7)), "ended");
        assert!(Transition::Canceled.is_final() && !Transition::Started.is_final());
    }

    #[test]
    fn sent_marks_round_trip_and_remember_a_schedule() {
        let mut sent = SentMarks::parse("");
        assert!(!sent.was_scheduled() && !sent.contains("started"));
        sent.insert(sent_mark(Transition::Scheduled, Some(7)));
        sent.insert("scheduled@7".into());
        sent.insert("started".into());
        assert_eq!(sent.render(), "scheduled@7\nstarted");
        let again = SentMarks::parse(&sent.render());
        assert!(again.contains("started") && again.was_scheduled());
        assert!(!again.contains("scheduled@8"));
    }
}

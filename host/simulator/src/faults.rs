//! Faults a scenario can inject into the Scheduled Events endpoint, each in a window of
//! scenario time, and the plan that says how one request is disturbed.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One fault. Which fields apply depends on `kind` (see SCENARIOS.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// The sort of fault; which other fields apply depends on it.
    pub kind: FaultKind,
    /// Start of the window (scenario time); the beginning of the run when absent.
    #[serde(default, with = "humantime_serde")]
    pub from: Option<Duration>,
    /// End of the window (exclusive); the end of the run when absent.
    #[serde(default, with = "humantime_serde")]
    pub until: Option<Duration>,
    /// `status`: the HTTP status to answer with (400–599, e.g. 429, 410, 500, 503).
    #[serde(default)]
    pub status: Option<u16>,
    /// `delay` and `slow-first-call`: how long to hold the response (wall time).
    #[serde(default, with = "humantime_serde")]
    pub delay: Option<Duration>,
    /// `malformed`: what to serve instead of the document.
    #[serde(default)]
    pub body: Option<MalformedBody>,
    /// `incarnation-reset`: when DocumentIncarnation drops back to 1.
    #[serde(default, with = "humantime_serde")]
    pub at: Option<Duration>,
    /// Which requests to scheduledevents the fault hits; GET only when absent.
    /// `malformed` is GET only.
    #[serde(default = "get_only")]
    pub methods: Vec<FaultMethod>,
    /// `status`, `delay`, `malformed`: hit only each VM's first N GETs (within the window),
    /// however long they take; every request when absent.
    #[serde(default)]
    pub first_requests: Option<u64>,
    /// The window opens only once IMDS has accepted an approval from the VM (and `from`
    /// has passed): a VM that loses IMDS right after approving.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_approval: bool,
    /// `vm-clock`: how far the VM's clock is from Azure's from `at` on (from the start when
    /// `at` is absent): `"-10s"` behind, `"+30s"` ahead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<ClockOffset>,
}

/// A fault whose fields do not fit its kind: shown as "FIELD: PROBLEM".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct MisfitField {
    /// The field to change (`first_requests`, `status`, …).
    pub field: &'static str,
    /// What is wrong with it, then how to fix it.
    pub problem: String,
}

impl MisfitField {
    fn new(field: &'static str, problem: &str) -> MisfitField {
        MisfitField {
            field,
            problem: problem.to_owned(),
        }
    }
}

/// How far the VM's clock is from Azure's: negative when it is behind. Written as a signed
/// duration, `"-10s"`, `"+1m 30s"`, `"250ms"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClockOffset {
    /// The VM's clock minus Azure's, in milliseconds.
    pub vm_minus_azure_ms: i64,
}

/// A `vm-clock` offset that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClockOffsetError {
    /// Not a duration, with or without a sign.
    #[error("\"{text}\" is not a signed duration like \"-10s\" or \"+30s\": {error}")]
    NotADuration {
        /// The text given.
        text: String,
        /// What the duration parser said.
        error: humantime_serde::re::humantime::DurationError,
    },
    /// Further off than a day.
    #[error("\"{text}\" is more than a day: give at most \"24h\"")]
    MoreThanADay {
        /// The text given.
        text: String,
    },
}

impl TryFrom<String> for ClockOffset {
    type Error = ClockOffsetError;

    fn try_from(text: String) -> Result<ClockOffset, ClockOffsetError> {
        let trimmed = text.trim();
        let (sign, magnitude) = match trimmed.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, trimmed.strip_prefix('+').unwrap_or(trimmed)),
        };
        let duration = match humantime_serde::re::humantime::parse_duration(magnitude.trim()) {
            Ok(duration) => duration,
            Err(error) => return Err(ClockOffsetError::NotADuration { text, error }),
        };
        let Some(ms) = i64::try_from(duration.as_millis())
            .ok()
            .filter(|ms| *ms <= CLOCK_OFFSET_MAX_MS)
        else {
            return Err(ClockOffsetError::MoreThanADay { text });
        };
        Ok(ClockOffset {
            vm_minus_azure_ms: sign * ms,
        })
    }
}

impl From<ClockOffset> for String {
    fn from(offset: ClockOffset) -> String {
        let sign = if offset.vm_minus_azure_ms < 0 {
            "-"
        } else {
            "+"
        };
        let magnitude = Duration::from_millis(offset.vm_minus_azure_ms.unsigned_abs());
        format!(
            "{sign}{}",
            humantime_serde::re::humantime::format_duration(magnitude)
        )
    }
}

/// The largest VM clock offset a scenario may give: a day.
const CLOCK_OFFSET_MAX_MS: i64 = 24 * 3600 * 1000;

/// The sorts of fault a scenario can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Answer with `status` and a JSON error body instead of the real answer.
    Status,
    /// Hold every response for `delay` before answering.
    Delay,
    /// Hold each VM's first GET for `delay`, once (IMDS: "a delayed response in your
    /// first call of up to two minutes").
    SlowFirstCall,
    /// Serve something that is not the document.
    Malformed,
    /// DocumentIncarnation drops back to 1 at `at`; events go on as before.
    IncarnationReset,
    /// The VM's clock is `offset` from Azure's from `at` on (from the start without `at`).
    /// The simulator cannot move the daemon's clock, so it moves Azure's: its `Date` header,
    /// the NotBefore it sends and the instant events start run on Azure's clock; a later
    /// `vm-clock` is a step.
    VmClock,
}

/// What a `malformed` fault serves instead of the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MalformedBody {
    /// Text that is not JSON at all.
    Garbage,
    /// The real document cut off halfway.
    Truncated,
}

/// The HTTP methods a fault can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultMethod {
    /// GET: reading the document.
    #[serde(rename = "GET", alias = "get")]
    Get,
    /// POST: approving events.
    #[serde(rename = "POST", alias = "post")]
    Post,
}

/// How one request is disturbed.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct FaultPlan {
    /// Wall time to wait before answering.
    pub(crate) delay: Duration,
    /// What to answer instead of the real answer, if anything.
    pub(crate) outcome: FaultOutcome,
    /// The faults that act on this request (a delay, and the status or malformed body
    /// that won), for the record of faults served.
    pub(crate) applied: Vec<FaultSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FaultOutcome {
    #[default]
    Normal,
    Status(u16),
    Malformed(MalformedBody),
}

fn get_only() -> Vec<FaultMethod> {
    vec![FaultMethod::Get]
}

impl FaultSpec {
    /// Whether the fault's fields fit its kind; the field and the problem, worded for the
    /// author, if not.
    pub fn check(&self) -> Result<(), MisfitField> {
        let misfit = |field, problem: &str| Err(MisfitField::new(field, problem));
        if let Some(count) = self.first_requests {
            if count == 0 {
                return misfit("first_requests", "give at least 1 (or leave it out)");
            }
            if matches!(
                self.kind,
                FaultKind::IncarnationReset | FaultKind::SlowFirstCall | FaultKind::VmClock
            ) {
                return misfit(
                    "first_requests",
                    "applies to status, delay and malformed only",
                );
            }
            if self.methods != [FaultMethod::Get] {
                return misfit(
                    "first_requests",
                    "counts GETs, so methods must be [\"GET\"]",
                );
            }
        }
        match self.kind {
            FaultKind::Status => match self.status {
                Some(code) if (400..=599).contains(&code) => Ok(()),
                Some(code) => misfit(
                    "status",
                    &format!("{code} is not an error status (400–599)"),
                ),
                None => misfit(
                    "status",
                    "a `status` fault needs a status, e.g. status = 429",
                ),
            },
            FaultKind::Delay | FaultKind::SlowFirstCall => match self.delay {
                Some(_) => Ok(()),
                None => misfit("delay", "this fault needs a delay, e.g. delay = \"3s\""),
            },
            FaultKind::Malformed => match (self.body, self.methods.contains(&FaultMethod::Post)) {
                (None, _) => misfit("body", "say \"garbage\" or \"truncated\""),
                (_, true) => misfit("methods", "a malformed body applies to GET only"),
                _ => Ok(()),
            },
            FaultKind::IncarnationReset => match self.at {
                Some(_) => Ok(()),
                None => misfit("at", "an incarnation reset needs `at`, e.g. at = \"1m\""),
            },
            FaultKind::VmClock => match self.offset {
                Some(_) => Ok(()),
                None => misfit(
                    "offset",
                    "say how far the VM's clock is from Azure's, e.g. offset = \"-10s\" (behind)",
                ),
            },
        }
    }

    /// Whether `now` (scenario time) is inside the fault's window.
    fn in_window(&self, now: Duration) -> bool {
        let started = self.from.is_none_or(|from| now >= from);
        let not_over = self.until.is_none_or(|until| now < until);
        started && not_over
    }

    /// Whether the fault acts on a request: `nth_in_window` is which GET of its VM within
    /// the window this is (from 1; 0 for a POST); `approved` whether IMDS accepted an
    /// approval from the VM before.
    fn active(
        &self,
        method: FaultMethod,
        now: Duration,
        nth_in_window: u64,
        approved: bool,
    ) -> bool {
        if self.after_approval && !approved {
            return false;
        }
        let counted = self
            .first_requests
            .is_none_or(|count| nth_in_window <= count);
        self.in_window(now) && counted && self.methods.contains(&method)
    }
}

/// Which GET to scheduledevents of its VM a request is: in all (1 for the first, for
/// `slow-first-call`) and within each fault's window (for `first_requests`); all 0 for a
/// POST.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GetNumbers {
    pub(crate) of_vm: u64,
    /// Whether IMDS accepted an approval from the VM before (for `after_approval`).
    pub(crate) approved: bool,
    /// By the fault's position in the scenario; 0 outside its window.
    pub(crate) in_window: Vec<u64>,
}

/// Counts each VM's GETs to scheduledevents, in all and within each fault's window.
#[derive(Debug, Default)]
pub(crate) struct GetCounts {
    of_vm: HashMap<String, u64>,
    in_window: HashMap<(String, usize), u64>,
    approved: HashSet<String>,
}

impl GetCounts {
    /// Counts one GET of `vm` at scenario time `now`, and says which it is.
    pub(crate) fn count(&mut self, vm: &str, faults: &[FaultSpec], now: Duration) -> GetNumbers {
        let of_vm = self.of_vm.entry(vm.to_owned()).or_default();
        *of_vm += 1;
        let in_window = faults
            .iter()
            .enumerate()
            .map(|(index, fault)| {
                if !fault.in_window(now) {
                    return 0;
                }
                let count = self.in_window.entry((vm.to_owned(), index)).or_default();
                *count += 1;
                *count
            })
            .collect();
        GetNumbers {
            of_vm: *of_vm,
            approved: self.approved.contains(vm),
            in_window,
        }
    }

    /// What a POST of `vm` is: not a GET, after an approval or not.
    pub(crate) fn post(&self, vm: &str) -> GetNumbers {
        GetNumbers {
            approved: self.approved.contains(vm),
            ..GetNumbers::default()
        }
    }

    /// IMDS accepted an approval from `vm`: `after_approval` faults act on it from now.
    pub(crate) fn approved(&mut self, vm: &str) {
        self.approved.insert(vm.to_owned());
    }

    /// Forgets every count (a scenario started again).
    pub(crate) fn clear(&mut self) {
        self.of_vm.clear();
        self.in_window.clear();
        self.approved.clear();
    }
}

/// The disturbance for one request to scheduledevents at scenario time `now`; `numbers`
/// says which GET of its VM it is ([`GetNumbers`]). The first matching fault of each sort
/// wins; delays add up.
pub(crate) fn plan_request(
    faults: &[FaultSpec],
    method: FaultMethod,
    now: Duration,
    numbers: &GetNumbers,
) -> FaultPlan {
    let first_call = numbers.of_vm == 1;
    let mut plan = FaultPlan::default();
    let nth_in_window = |index: usize| numbers.in_window.get(index).copied().unwrap_or(0);
    for fault in faults
        .iter()
        .enumerate()
        .filter(|(index, fault)| fault.active(method, now, nth_in_window(*index), numbers.approved))
        .map(|(_, fault)| fault)
    {
        match fault.kind {
            FaultKind::Delay => plan.delay += fault.delay.unwrap_or_default(),
            FaultKind::SlowFirstCall if first_call => {
                plan.delay += fault.delay.unwrap_or_default();
            }
            FaultKind::Status if plan.outcome == FaultOutcome::Normal => {
                plan.outcome = FaultOutcome::Status(fault.status.unwrap_or(500));
            }
            FaultKind::Malformed if plan.outcome == FaultOutcome::Normal => {
                plan.outcome =
                    FaultOutcome::Malformed(fault.body.unwrap_or(MalformedBody::Garbage));
            }
            _ => continue,
        }
        plan.applied.push(fault.clone());
    }
    plan
}

/// The scenario times at which DocumentIncarnation drops back to 1, earliest first.
pub(crate) fn incarnation_resets(faults: &[FaultSpec]) -> Vec<Duration> {
    let mut resets: Vec<Duration> = faults
        .iter()
        .filter(|fault| fault.kind == FaultKind::IncarnationReset)
        .filter_map(|fault| fault.at)
        .collect();
    resets.sort();
    resets
}

/// How far Azure's clock is ahead of the VM's (ms) at the start, and each later change:
/// (scenario instant, how far ahead from then on), earliest first, from the `vm-clock`
/// faults. The first `vm-clock` without `at` (or at 0) sets the start.
pub(crate) fn vm_clock_changes(faults: &[FaultSpec]) -> (i64, Vec<(Duration, i64)>) {
    let mut initial = 0;
    let mut changes: Vec<(Duration, i64)> = Vec::new();
    let mut initial_set = false;
    for fault in faults
        .iter()
        .filter(|fault| fault.kind == FaultKind::VmClock)
    {
        let ahead = -fault.offset.unwrap_or_default().vm_minus_azure_ms;
        match fault.at.filter(|at| !at.is_zero()) {
            None if !initial_set => {
                initial = ahead;
                initial_set = true;
            }
            at => changes.push((at.unwrap_or_default(), ahead)),
        }
    }
    changes.sort_by_key(|(at, _)| *at);
    (initial, changes)
}

/// What a malformed answer carries instead of `document`.
pub(crate) fn malformed_text(body: MalformedBody, document: &str) -> String {
    match body {
        MalformedBody::Garbage => "<html><body>upstream error</body></html>{\"Docu".into(),
        MalformedBody::Truncated => {
            let half = document.len() / 2;
            let cut = (0..=half)
                .rev()
                .find(|index| document.is_char_boundary(*index))
                .unwrap_or(0);
            document[..cut].to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(kind: FaultKind, from: u64, until: u64) -> FaultSpec {
        FaultSpec {
            kind,
            from: Some(Duration::from_secs(from)),
            until: Some(Duration::from_secs(until)),
            status: Some(429),
            delay: Some(Duration::from_millis(200)),
            body: Some(MalformedBody::Truncated),
            at: None,
            methods: get_only(),
            first_requests: None,
            after_approval: false,
            offset: None,
        }
    }

    /// The numbers of a VM's `nth` GET, the `nth` too within each of `faults` windows.
    fn nth_get(nth: u64, faults: usize) -> GetNumbers {
        GetNumbers {
            of_vm: nth,
            approved: false,
            in_window: vec![nth; faults],
        }
    }

    #[test]
    fn status_applies_only_inside_its_window_and_methods() {
        let faults = [fault(FaultKind::Status, 10, 20)];
        let at = |secs| {
            plan_request(
                &faults,
                FaultMethod::Get,
                Duration::from_secs(secs),
                &nth_get(2, 1),
            )
        };
        assert_eq!(at(9).outcome, FaultOutcome::Normal);
        assert_eq!(at(10).outcome, FaultOutcome::Status(429));
        assert_eq!(at(20).outcome, FaultOutcome::Normal);
        let post = plan_request(
            &faults,
            FaultMethod::Post,
            Duration::from_secs(15),
            &GetNumbers::default(),
        );
        assert_eq!(post.outcome, FaultOutcome::Normal);
    }

    #[test]
    fn slow_first_call_only_delays_the_first_call() {
        let faults = [fault(FaultKind::SlowFirstCall, 0, 100)];
        let first = plan_request(&faults, FaultMethod::Get, Duration::ZERO, &nth_get(1, 1));
        let later = plan_request(&faults, FaultMethod::Get, Duration::ZERO, &nth_get(2, 1));
        assert_eq!(first.delay, Duration::from_millis(200));
        assert_eq!(later.delay, Duration::ZERO);
    }

    #[test]
    fn after_approval_waits_for_the_vms_first_accepted_approval() {
        let mut held = fault(FaultKind::Delay, 0, 100);
        held.after_approval = true;
        let faults = [held];
        let mut counts = GetCounts::default();
        let get = |counts: &mut GetCounts, vm: &str| {
            let numbers = counts.count(vm, &faults, Duration::from_secs(1));
            plan_request(&faults, FaultMethod::Get, Duration::from_secs(1), &numbers).delay
        };
        assert_eq!(get(&mut counts, "vm-a"), Duration::ZERO);
        counts.approved("vm-a");
        assert_eq!(get(&mut counts, "vm-a"), Duration::from_millis(200));
        assert_eq!(
            get(&mut counts, "vm-b"),
            Duration::ZERO,
            "another VM's approval"
        );
        counts.clear();
        assert_eq!(
            get(&mut counts, "vm-a"),
            Duration::ZERO,
            "a restarted scenario"
        );
    }

    #[test]
    fn first_requests_hits_only_the_first_gets() {
        let mut failing = fault(FaultKind::Status, 0, 100);
        failing.first_requests = Some(2);
        let faults = [failing];
        let nth = |n| {
            plan_request(
                &faults,
                FaultMethod::Get,
                Duration::from_secs(1),
                &nth_get(n, 1),
            )
            .outcome
        };
        assert_eq!(nth(1), FaultOutcome::Status(429));
        assert_eq!(nth(2), FaultOutcome::Status(429));
        assert_eq!(nth(3), FaultOutcome::Normal);
    }

    #[test]
    fn first_requests_counts_the_gets_within_its_window() {
        // A fault from 10 s on holds the first GET of its window, however many came before.
        let mut held = fault(FaultKind::Delay, 10, 100);
        held.first_requests = Some(1);
        let faults = [held];
        let mut counts = GetCounts::default();
        let mut delay_at = |secs| {
            let now = Duration::from_secs(secs);
            let numbers = counts.count("vm-a", &faults, now);
            plan_request(&faults, FaultMethod::Get, now, &numbers).delay
        };
        for early in 0..10 {
            assert_eq!(delay_at(early), Duration::ZERO, "before the window");
        }
        assert_eq!(
            delay_at(10),
            Duration::from_millis(200),
            "the window's first"
        );
        assert_eq!(delay_at(11), Duration::ZERO, "the window's second");
    }

    #[test]
    fn truncated_document_is_not_json() {
        let text = malformed_text(
            MalformedBody::Truncated,
            r#"{"DocumentIncarnation":1,"Events":[]}"#,
        );
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_err());
    }

    #[test]
    fn vm_clock_offsets_read_signed_and_sort_into_start_and_steps() {
        let offset = |text: &str| ClockOffset::try_from(text.to_owned());
        assert_eq!(offset("-10s").unwrap().vm_minus_azure_ms, -10_000);
        assert_eq!(offset("+1m 30s").unwrap().vm_minus_azure_ms, 90_000);
        assert_eq!(offset("250ms").unwrap().vm_minus_azure_ms, 250);
        assert!(offset("soon").unwrap_err().to_string().contains("-10s"));
        assert!(offset("-2d").unwrap_err().to_string().contains("24h"));
        assert_eq!(String::from(offset("-10s").unwrap()), "-10s");
        let clock = |offset_text: &str, at: Option<u64>| FaultSpec {
            kind: FaultKind::VmClock,
            at: at.map(Duration::from_secs),
            offset: Some(offset(offset_text).unwrap()),
            ..fault(FaultKind::VmClock, 0, 1)
        };
        let faults = [
            clock("+5s", Some(20)),
            clock("-10s", None),
            clock("0s", Some(10)),
        ];
        assert_eq!(
            vm_clock_changes(&faults),
            (
                10_000,
                vec![
                    (Duration::from_secs(10), 0),
                    (Duration::from_secs(20), -5_000)
                ]
            )
        );
        let mut missing = clock("0s", None);
        missing.offset = None;
        assert!(
            missing
                .check()
                .unwrap_err()
                .to_string()
                .starts_with("offset")
        );
    }

    #[test]
    fn fault_checks_name_the_missing_field() {
        let mut missing = fault(FaultKind::Status, 0, 1);
        missing.status = None;
        assert!(
            missing
                .check()
                .unwrap_err()
                .to_string()
                .starts_with("status")
        );
    }
}

//! The Scheduled Events JSON wire format: a lenient parser for documents of every
//! api-version, a strict renderer in the 2020-07-01 shape, and the `StartRequests` body.

use std::time::SystemTime;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::{Map, Value};

use forewarn_events::{
    Document, EventField, EventSource, EventStatus, EventType, ScheduledEvent, UnreadableField,
};
use forewarn_events::{EventId, ParseError};

/// How many characters of offending input an error message quotes.
const EXCERPT_CHARS: usize = 200;

/// The body of an approval: `{"StartRequests":[{"EventId":"…"}]}` (the client renders it
/// straight from the ids; this wrapper lets the tests round-trip it).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct StartRequests {
    /// The `EventId`s to start, in order.
    pub(crate) event_ids: Vec<EventId>,
}

#[cfg(test)]
impl StartRequests {
    /// Renders this body exactly as the API specifies (see [`render_start_requests`]).
    pub(crate) fn render(&self) -> String {
        render_start_requests(&self.event_ids)
    }

    /// Parses a body strictly (see [`parse_start_requests`]).
    pub(crate) fn parse(text: &str) -> Result<StartRequests, ParseError> {
        parse_start_requests(text).map(|event_ids| StartRequests { event_ids })
    }
}

/// Parses a Scheduled Events document leniently: any api-version from 2017-03-01 to
/// 2020-07-01, field names in any case, unknown fields ignored, optional fields missing,
/// `NotBefore` in any common date format. Rejects (as a whole) a document that is not an
/// object or has no `Events` array; an entry without `EventId` goes to `rejected`, and the
/// other events are kept. A field of an event that cannot be read (a `NotBefore` in no known
/// format, odd `Resources`, an unknown `EventType` or `EventStatus`, a `DurationInSeconds`
/// that is not a number) is read the safe way and kept in [`ScheduledEvent::unreadable`].
pub fn parse_document(text: &str) -> Result<Document, ParseError> {
    let value = parse_json(text)?;
    let object = as_object(&value, text)?;
    let incarnation = field(object, "DocumentIncarnation").and_then(read_incarnation);
    // Lenient: a null `Events` is as good as none.
    let events = field(object, "Events").filter(|events| !events.is_null());
    let events = required_array("Events", events, text)?;
    let (events, rejected) = events.iter().enumerate().fold(
        (Vec::new(), Vec::new()),
        |(mut events, mut rejected), (index, event)| {
            match parse_event(index, event) {
                Ok(event) => events.push(event),
                Err(error) => rejected.push(error),
            }
            (events, rejected)
        },
    );
    Ok(Document {
        incarnation,
        events,
        rejected,
    })
}

/// Renders a document exactly as api-version 2020-07-01 does: PascalCase names, `NotBefore`
/// in RFC 1123 ("Mon, 11 Apr 2022 22:26:58 GMT", sub-seconds dropped), or when None the text
/// of an unreadable `NotBefore` (so the simulator can serve one) or "",
/// `DurationInSeconds` -1 when None. `DocumentIncarnation` is left out when None (IMDS
/// always sends one; give the simulator's documents one).
pub fn render_document(doc: &Document) -> String {
    to_json(&WireDocument {
        document_incarnation: doc.incarnation,
        events: doc.events.iter().map(wire_event).collect(),
    })
}

/// Renders an approval body: `{"StartRequests":[{"EventId":"…"},…]}`.
pub(crate) fn render_start_requests(ids: &[EventId]) -> String {
    to_json(&WireStartRequests {
        start_requests: ids
            .iter()
            .map(|id| WireStartRequest {
                event_id: id.as_str(),
            })
            .collect(),
    })
}

/// Parses an approval body strictly, as IMDS would: an object with a `StartRequests` array
/// of objects each holding a non-empty string `EventId` (names exact). Anything else is an
/// error (the simulator answers it with 400).
pub fn parse_start_requests(text: &str) -> Result<Vec<EventId>, ParseError> {
    let value = parse_json(text)?;
    let object = as_object(&value, text)?;
    let requests = required_array("StartRequests", object.get("StartRequests"), text)?;
    requests
        .iter()
        .enumerate()
        .map(|(index, request)| match request.get("EventId") {
            Some(Value::String(id)) if !id.trim().is_empty() => Ok(EventId::from(id)),
            _ => Err(ParseError::MissingEventId {
                index,
                excerpt: excerpt(&request.to_string()),
            }),
        })
        .collect()
}

/// Formats a time as RFC 1123 in GMT, whole seconds: "Mon, 11 Apr 2022 22:26:58 GMT" (a
/// NotBefore, or an HTTP `Date` header).
pub fn format_rfc1123(time: SystemTime) -> String {
    DateTime::<Utc>::from(time)
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// Reads a time in any format IMDS (or an older api-version, or something in between)
/// might plausibly use: RFC 1123 / RFC 2822 (even with a wrong weekday), RFC 3339 / ISO 8601
/// with or without a zone and with fractional seconds, "2022-04-11 22:26:58", and the
/// obsolete HTTP dates RFC 850 and asctime. A time without a zone is UTC (every time IMDS
/// sends is). None when the text is in no known format — epoch seconds, "-1", an impossible
/// date (30 February), a date without a time — whose event is then prepared at once.
pub(crate) fn parse_time(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    parse_rfc2822_time(text)
        .or_else(|| parse_iso_time(text))
        .or_else(|| parse_naive_utc_time(text))
        .map(SystemTime::from)
}

fn parse_rfc2822_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(time) = DateTime::parse_from_rfc2822(text) {
        return Some(time.to_utc());
    }
    // "Tue, 11 Apr 2022 …" with a weekday that does not match the date: the date wins.
    let (weekday, rest) = text.split_once(',')?;
    if !weekday.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    DateTime::parse_from_rfc2822(rest.trim())
        .ok()
        .map(|time| time.to_utc())
}

fn parse_iso_time(text: &str) -> Option<DateTime<Utc>> {
    const ZONED_FORMATS: [&str; 4] = [
        "%Y-%m-%dT%H:%M:%S%.f%#z",
        "%Y-%m-%d %H:%M:%S%.f%#z",
        "%Y-%m-%dT%H:%M:%S%.f %#z",
        "%Y-%m-%d %H:%M:%S%.f %#z",
    ];
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.to_utc());
    }
    ZONED_FORMATS
        .iter()
        .find_map(|format| DateTime::parse_from_str(text, format).ok())
        .map(|time| time.to_utc())
}

fn parse_naive_utc_time(text: &str) -> Option<DateTime<Utc>> {
    const NAIVE_FORMATS: [&str; 8] = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
        // RFC 1123 without its zone: "Mon, 11 Apr 2022 22:26:58", "11 Apr 2022 22:26:58".
        "%a, %d %b %Y %H:%M:%S",
        "%d %b %Y %H:%M:%S",
        // RFC 850, the obsolete HTTP date: "Monday, 11-Apr-22 22:26:58 GMT".
        "%A, %d-%b-%y %H:%M:%S",
        // asctime, the other obsolete HTTP date: "Mon Apr 11 22:26:58 2022".
        "%a %b %e %H:%M:%S %Y",
    ];
    let without_zone = ["UTC", "GMT", "Z", "z"]
        .iter()
        .find_map(|zone| text.strip_suffix(zone))
        .unwrap_or(text)
        .trim_end();
    NAIVE_FORMATS
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(without_zone, format).ok())
        .map(|naive| naive.and_utc())
}

/// The array `found` under the name `name`, which the document `text` cannot do without:
/// absent is [`ParseError::MissingField`], anything but an array [`ParseError::WrongType`].
fn required_array<'a>(
    name: &'static str,
    found: Option<&'a Value>,
    text: &str,
) -> Result<&'a Vec<Value>, ParseError> {
    match found {
        None => Err(ParseError::MissingField {
            field: name,
            excerpt: excerpt(text),
        }),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(ParseError::WrongType {
            field: name,
            expected: "an array",
            excerpt: excerpt(&other.to_string()),
        }),
    }
}

/// Parses `text` as JSON, or says why not with the start of the text.
pub(crate) fn parse_json(text: &str) -> Result<Value, ParseError> {
    serde_json::from_str(text).map_err(|error| ParseError::NotJson {
        reason: error.to_string(),
        excerpt: excerpt(text),
    })
}

fn as_object<'a>(value: &'a Value, text: &str) -> Result<&'a Map<String, Value>, ParseError> {
    value.as_object().ok_or_else(|| ParseError::NotAnObject {
        found: json_kind(value),
        excerpt: excerpt(text),
    })
}

fn parse_event(index: usize, value: &Value) -> Result<ScheduledEvent, ParseError> {
    let Some(object) = value.as_object() else {
        return Err(ParseError::MissingEventId {
            index,
            excerpt: excerpt(&value.to_string()),
        });
    };
    let id = read_event_id(object).ok_or_else(|| ParseError::MissingEventId {
        index,
        excerpt: excerpt(&value.to_string()),
    })?;
    let mut unreadable = Vec::new();
    let mut note = |field: EventField, raw: String| {
        unreadable.push(UnreadableField {
            field,
            raw: excerpt(&raw),
        });
    };
    let event_type_raw = field(object, "EventType")
        .map(scalar_text)
        .unwrap_or_default();
    let event_type = EventType::from_wire(&event_type_raw);
    if event_type == EventType::Unknown {
        note(EventField::EventType, event_type_raw.clone());
    }
    let resources = read_resources(field(object, "Resources")).unwrap_or_else(|raw| {
        note(EventField::Resources, raw);
        Vec::new()
    });
    let status = read_status(field(object, "EventStatus")).unwrap_or_else(|raw| {
        note(EventField::EventStatus, raw);
        EventStatus::Scheduled
    });
    let not_before = read_not_before(field(object, "NotBefore")).unwrap_or_else(|raw| {
        note(EventField::NotBefore, raw);
        None
    });
    let duration_seconds =
        read_duration(field(object, "DurationInSeconds")).unwrap_or_else(|raw| {
            note(EventField::DurationInSeconds, raw);
            None
        });
    unreadable.sort_by_key(|unreadable| unreadable.field);
    Ok(ScheduledEvent {
        event_type,
        event_type_raw,
        resource_type: field(object, "ResourceType")
            .map(scalar_text)
            .unwrap_or_default(),
        resources,
        status,
        not_before,
        description: field(object, "Description")
            .map(scalar_text)
            .unwrap_or_default(),
        source: EventSource::from_wire(
            &field(object, "EventSource")
                .map(scalar_text)
                .unwrap_or_default(),
        ),
        duration_seconds,
        unreadable,
        id,
    })
}

/// Looks a field up by name, exact match first, then ignoring ASCII case.
pub(crate) fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object.get(name).or_else(|| {
        object
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    })
}

fn read_event_id(object: &Map<String, Value>) -> Option<EventId> {
    let id = match field(object, "EventId")? {
        Value::String(id) => id.clone(),
        Value::Number(number) => number.to_string(),
        _ => return None,
    };
    (!id.trim().is_empty()).then(|| EventId::from(id))
}

fn read_incarnation(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// `Resources`: a list of names (numbers read as text), a single name, or nothing; the
/// value as JSON when it is anything else.
fn read_resources(value: Option<&Value>) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(single)) => Ok(vec![single.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(name) => Ok(name.clone()),
                Value::Number(number) => Ok(number.to_string()),
                _ => Err(Value::Array(items.clone()).to_string()),
            })
            .collect(),
        Some(other) => Err(other.to_string()),
    }
}

/// `EventStatus`, case-insensitively; the text when it is neither Scheduled nor Started
/// (absent reads as "").
fn read_status(value: Option<&Value>) -> Result<EventStatus, String> {
    let text = value.map(scalar_text).unwrap_or_default();
    match text.trim() {
        t if t.eq_ignore_ascii_case("Started") => Ok(EventStatus::Started),
        t if t.eq_ignore_ascii_case("Scheduled") => Ok(EventStatus::Scheduled),
        _ => Err(text),
    }
}

/// `NotBefore`: None when absent, null or blank (IMDS blanks it once an event started);
/// the text (or JSON) when it is in no format [`parse_time`] reads.
fn read_not_before(value: Option<&Value>) -> Result<Option<SystemTime>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => parse_time(text).map(Some).ok_or_else(|| text.clone()),
        Some(other) => Err(other.to_string()),
    }
}

/// `DurationInSeconds`: None when absent, null, blank or -1 (unknown); the text (or JSON)
/// when it is not a whole number of seconds from -1 up.
fn read_duration(value: Option<&Value>) -> Result<Option<i64>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let seconds = match value {
        Value::Null => return Ok(None),
        Value::Number(number) => number.as_i64().or_else(|| {
            number
                .as_f64()
                .filter(|f| f.fract() == 0.0)
                .map(|f| f as i64)
        }),
        Value::String(text) if text.trim().is_empty() => return Ok(None),
        Value::String(text) => text.trim().parse::<i64>().ok(),
        _ => None,
    };
    match seconds {
        Some(seconds) if seconds >= 0 => Ok(Some(seconds)),
        Some(-1) => Ok(None),
        _ => Err(scalar_text(value)),
    }
}

/// The text of a scalar: strings as they are, numbers and booleans as JSON, null as "".
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// One event exactly as api-version 2020-07-01 sends it, fields in the documented order.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct WireEvent<'a> {
    event_id: &'a str,
    event_status: &'static str,
    event_type: &'a str,
    resource_type: &'a str,
    resources: &'a [String],
    not_before: String,
    description: &'a str,
    event_source: &'static str,
    duration_in_seconds: i64,
}

/// A document exactly as api-version 2020-07-01 sends it.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct WireDocument<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    document_incarnation: Option<u64>,
    events: Vec<WireEvent<'a>>,
}

/// An approval body exactly as the API specifies.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct WireStartRequests<'a> {
    start_requests: Vec<WireStartRequest<'a>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct WireStartRequest<'a> {
    event_id: &'a str,
}

fn wire_event(event: &ScheduledEvent) -> WireEvent<'_> {
    let event_type = match event.event_type {
        EventType::Unknown => event.event_type_raw.as_str(),
        known => known.as_wire(),
    };
    WireEvent {
        event_id: event.id.as_str(),
        event_status: event.status.as_wire(),
        event_type,
        resource_type: &event.resource_type,
        resources: &event.resources,
        not_before: match (event.not_before, event.unreadable(EventField::NotBefore)) {
            (Some(time), _) => format_rfc1123(time),
            (None, Some(raw)) => raw.to_owned(),
            (None, None) => String::new(),
        },
        description: &event.description,
        event_source: event.source.as_wire(),
        duration_in_seconds: event.duration_seconds.unwrap_or(-1),
    }
}

/// Serialises a wire struct; these hold only strings and integers, so it cannot fail.
fn to_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|error| {
        tracing::error!(%error, "could not serialise IMDS JSON; this is a bug in forewarn");
        String::new()
    })
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The first ~200 characters of `text`, with "…" when cut.
pub(crate) fn excerpt(text: &str) -> String {
    truncate(text, EXCERPT_CHARS)
}

/// The first `max_chars` characters of `text`, with "…" when cut.
pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests;

//! How the daemon's log lines are written, text or JSON: the one place where every field
//! value is escaped and cut, whatever it holds. A log field may carry text from outside —
//! an IMDS EventId, EventType or resource name, a file name in the plugin directory, a
//! manifest's text, an error an HTTP server or etcd answered — and a newline or a terminal
//! escape in it must not forge a line of the log or rewrite a terminal. So each value is
//! written with its control characters escaped (`\n`, `\u{1b}`; see
//! [`forewarn_runtime::log_safe`]) and cut at [`LOG_FIELD_VALUE_MAX_BYTES`], in both
//! formats (in JSON too, so `jq -r` prints one line per field).

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Longest value of one log field, the message included, once escaped.
pub const LOG_FIELD_VALUE_MAX_BYTES: usize = forewarn_runtime::LOG_LINE_MAX_BYTES;

/// A field's value as it is written: escaped, and cut at [`LOG_FIELD_VALUE_MAX_BYTES`].
pub fn field_text(value: &str) -> String {
    forewarn_runtime::log_safe(value, LOG_FIELD_VALUE_MAX_BYTES)
}

/// Every string in `value`, object keys included, escaped and cut like a log field: what
/// the admin endpoint answers (`/status`, `/status/history`, read by the status page and
/// by scripts) and what `forewarn status` prints hold no raw text from outside either.
pub fn escape_json_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) => {
            let escaped = field_text(text);
            if escaped != *text {
                *text = escaped;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(escape_json_strings),
        serde_json::Value::Object(members) => {
            let escaped: serde_json::Map<String, serde_json::Value> = std::mem::take(members)
                .into_iter()
                .map(|(key, mut value)| {
                    escape_json_strings(&mut value);
                    (field_text(&key), value)
                })
                .collect();
            *members = escaped;
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
    }
}

/// `value` as (pretty) JSON with every string escaped and cut ([`escape_json_strings`]).
pub fn escaped_json<T: serde::Serialize>(value: &T, pretty: bool) -> serde_json::Result<String> {
    let mut value = serde_json::to_value(value)?;
    escape_json_strings(&mut value);
    if pretty {
        serde_json::to_string_pretty(&value)
    } else {
        serde_json::to_string(&value)
    }
}

/// The text format's fields (`message key=value …`, as tracing-subscriber writes them),
/// each value escaped and cut.
pub struct EscapedFields;

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut visitor = TextFields {
            writer: &mut writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct TextFields<'a, 'writer> {
    writer: &'a mut Writer<'writer>,
    first: bool,
    result: fmt::Result,
}

impl Visit for TextFields<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{}", error_chain(value)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `log.*` fields carry a `log` crate record's metadata, which the format writes.
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        let text = field_text(&format!("{value:?}"));
        let pad = if self.first { "" } else { " " };
        self.first = false;
        self.result = match field.name() {
            "message" => write!(self.writer, "{pad}{text}"),
            name => write!(self.writer, "{pad}{}={text}", name.trim_start_matches("r#")),
        };
    }
}

/// The JSON format: one object per line, the fields flattened beside `timestamp`, `level`
/// and `target` (as tracing-subscriber's `json().flatten_event(true)` writes them), each
/// string value escaped and cut.
pub struct EscapedJson;

impl<S, N> FormatEvent<S, N> for EscapedJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let metadata = event.metadata();
        let target = fields
            .log_target
            .take()
            .unwrap_or_else(|| metadata.target().to_owned());
        let timestamp = chrono::Utc::now()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let mut line = String::from("{");
        push_member(&mut line, "timestamp", &timestamp.into());
        push_member(&mut line, "level", &metadata.level().as_str().into());
        for (name, value) in &fields.members {
            push_member(&mut line, name, value);
        }
        push_member(&mut line, "target", &field_text(&target).into());
        line.push('}');
        writeln!(writer, "{line}")
    }
}

/// `"name":value` after a comma unless first.
fn push_member(line: &mut String, name: &str, value: &serde_json::Value) {
    if line.len() > 1 {
        line.push(',');
    }
    let name = serde_json::Value::from(name);
    let _ = write!(line, "{name}:{value}");
}

#[derive(Default)]
struct JsonFields {
    members: Vec<(String, serde_json::Value)>,
    /// A `log` crate record's target (`log.target`), which stands for the event's.
    log_target: Option<String>,
}

impl JsonFields {
    fn push(&mut self, field: &Field, value: serde_json::Value) {
        let name = field.name().trim_start_matches("r#");
        self.members.push((name.to_owned(), value));
    }
}

impl Visit for JsonFields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "log.target" => self.log_target = Some(value.to_owned()),
            name if name.starts_with("log.") => {}
            _ => self.push(field, field_text(value).into()),
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, field_text(&error_chain(value)).into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name().starts_with("log.") {
            return;
        }
        self.push(field, field_text(&format!("{value:?}")).into());
    }
}

/// An error and its sources, `outer: inner: …`.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// A writer collecting what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("lock").clone()).expect("UTF-8")
        }
    }

    const FORGING_ID: &str = "E1\n2026-01-01T00:00:00Z  INFO forewarn_host::daemon: approved at IMDS event_ids=FORGED\r\u{1b}[2K";

    fn log_forging_fields() {
        tracing::info!(event_id = %FORGING_ID, plugin = "p\nq", resources = ?["a\nb"], "event {}", "x\ny");
    }

    #[test]
    fn the_text_format_writes_one_line_per_event_whatever_the_fields_hold() {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .fmt_fields(EscapedFields)
            .with_writer(captured.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log_forging_fields);
        let text = captured.text();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
        assert!(
            text.contains("event x\\ny event_id=E1\\n2026-01-01"),
            "{text}"
        );
    }

    #[test]
    fn the_json_format_writes_no_control_character_into_a_value() {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .event_format(EscapedJson)
            .with_writer(captured.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log_forging_fields);
        let text = captured.text();
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(text.trim()).expect("JSON");
        let id = line["event_id"].as_str().expect("event_id");
        assert!(!id.chars().any(char::is_control), "{id:?}");
        assert!(id.starts_with("E1\\n2026"), "{id}");
        assert_eq!(line["message"], "event x\\ny");
        assert_eq!(line["level"], "INFO");
        assert!(line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert_eq!(line["target"], module_path!());
    }

    #[test]
    fn every_string_of_a_json_answer_is_escaped_keys_included() {
        let mut value = serde_json::json!({
            "id": FORGING_ID,
            "list": ["a\nb", 1, true, null],
            "map": { "k\u{1b}": "v\r" },
        });
        escape_json_strings(&mut value);
        let id = value["id"].as_str().expect("a string");
        assert!(!id.chars().any(char::is_control), "{id:?}");
        assert_eq!(value["list"][0], "a\\nb");
        assert_eq!(value["map"]["k\\u{1b}"], "v\\r");
        assert_eq!(value["list"][1], 1);
    }

    #[test]
    fn a_long_value_is_cut() {
        let cut = field_text(&"x".repeat(100_000));
        assert!(cut.len() <= LOG_FIELD_VALUE_MAX_BYTES, "{}", cut.len());
    }
}

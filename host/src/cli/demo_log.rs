//! The demo's logging: instead of raw tracing output on the terminal, warnings and errors
//! become lines of the demo's timeline (plugins' own lines reach it through the daemon).

use std::fmt::Write;
use std::sync::OnceLock;

use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;

/// One warning or error the daemon logged while the demo ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DemoLogLine {
    pub level: Level,
    /// The message, then the event's fields as `key=value`.
    pub text: String,
}

/// Where the layer sends lines: set once by the running demo.
static SINK: OnceLock<mpsc::UnboundedSender<DemoLogLine>> = OnceLock::new();

/// Routes the layer's lines to `sink` (the first call wins; later calls are ignored).
pub(crate) fn route_to(sink: mpsc::UnboundedSender<DemoLogLine>) {
    let _ignored = SINK.set(sink);
}

/// A tracing layer that hands each event it sees to the demo's timeline printer (events
/// before the printer exists, or after it ended, are dropped).
pub struct DemoLogLayer;

impl<S: Subscriber> tracing_subscriber::Layer<S> for DemoLogLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let Some(sink) = SINK.get() else {
            return;
        };
        let mut fields = FieldText::default();
        event.record(&mut fields);
        let _ignored = sink.send(DemoLogLine {
            level: *event.metadata().level(),
            text: fields.finish(),
        });
    }
}

/// The message and `key=value` pairs of one event.
#[derive(Default)]
struct FieldText {
    message: String,
    rest: String,
}

impl FieldText {
    fn finish(self) -> String {
        match self.rest.is_empty() {
            true => self.message,
            false => format!("{}  ({})", self.message, self.rest.trim_start()),
        }
    }
}

impl Visit for FieldText {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, &format!("{value:?}"));
    }
}

impl FieldText {
    fn record(&mut self, field: &Field, value: &str) {
        let value = forewarn_daemon::log_format::field_text(value);
        if field.name() == "message" {
            self.message = value;
            return;
        }
        let _ = write!(self.rest, " {}={value}", field.name());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn events_become_one_line_with_their_fields() {
        let (sender, mut lines) = mpsc::unbounded_channel();
        route_to(sender);
        let subscriber = tracing_subscriber::registry().with(DemoLogLayer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(plugin = "lb-drain", attempt = 2, "something odd");
        });
        let line = lines.try_recv().expect("one line");
        assert_eq!(line.level, Level::WARN);
        assert_eq!(line.text, "something odd  (plugin=lb-drain attempt=2)");
    }
}

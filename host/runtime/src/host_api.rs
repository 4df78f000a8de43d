//! The `host` interface of the WIT contract as the daemon implements it: logging under the
//! plugin's name, config lookup, durable state, readiness, HTTP and actions; grants first.

use crate::actions;
use crate::bindings::forewarn::plugin::{host, types};
use crate::bindings::{ActionOutput, HostError, HttpRequest, HttpResponse, Level};
use crate::call_state::{CallState, LOG_FIELD_MAX_BYTES, LOG_LINE_MAX_BYTES};
use crate::http;
use crate::plugin_log::PluginLogLine;

/// The target plugin log lines are written under, so operators can filter them.
pub const PLUGIN_LOG_TARGET: &str = "forewarn::plugin";

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: Level, message: String) {
        if !self.take_log_line() {
            return;
        }
        let message = log_safe(&message, LOG_LINE_MAX_BYTES);
        write_plugin_log(&self.plugin, level, &message);
        self.logged.push(PluginLogLine::new(level.into(), &message));
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.settings.config.get(&key).cloned()
    }

    fn state_get(&mut self, key: String) -> Option<Vec<u8>> {
        self.services.state.get(&self.plugin, &key)
    }

    async fn state_set(&mut self, key: String, value: Vec<u8>) -> Result<(), HostError> {
        self.take_state_write(key.len().saturating_add(value.len()))
            .map_err(HostError::Invalid)?;
        let store = self.services.state.clone();
        let plugin = self.plugin.clone();
        let write = move || store.set(&plugin, &key, &value).map_err(HostError::Invalid);
        off_the_workers(write, self.deadline).await
    }

    async fn state_delete(&mut self, key: String) -> Result<(), HostError> {
        self.take_state_write(key.len())
            .map_err(HostError::Invalid)?;
        let store = self.services.state.clone();
        let plugin = self.plugin.clone();
        let write = move || store.delete(&plugin, &key).map_err(HostError::Failed);
        off_the_workers(write, self.deadline).await
    }

    fn set_ready(&mut self, ready: bool) -> Result<(), HostError> {
        if !self.settings.grants.readiness {
            return Err(HostError::NotGranted(format!(
                "plugin `{}` may not change readiness: add `readiness = true` under \
                 [capabilities] in its manifest",
                self.plugin
            )));
        }
        if self.services.readiness.set(&self.plugin, ready) {
            tracing::info!(plugin = %self.plugin, ready, "readiness changed by plugin");
        }
        Ok(())
    }

    async fn http_send(&mut self, request: HttpRequest) -> Result<HttpResponse, HostError> {
        let checked = http::check_allowed(&self.plugin, &request.url, &self.settings.grants.http);
        let url = match checked {
            Ok(url) => url,
            Err(error) => {
                if self.take_log_line() {
                    tracing::warn!(
                        plugin = %self.plugin,
                        url = %log_safe(&request.url, LOG_FIELD_MAX_BYTES),
                        error = %log_safe(&describe(&error), LOG_FIELD_MAX_BYTES),
                        "plugin HTTP request refused"
                    );
                }
                return Err(error);
            }
        };
        let method = log_safe(&request.method, LOG_FIELD_MAX_BYTES);
        let result = http::send(&self.services.http, request, url.clone(), self.deadline).await;
        if !self.take_log_line() {
            return result;
        }
        let url = log_safe(url.as_str(), LOG_FIELD_MAX_BYTES);
        match &result {
            Ok(response) => {
                tracing::debug!(plugin = %self.plugin, %method, %url, status = response.status, "plugin HTTP request")
            }
            Err(error) => {
                let error = log_safe(&describe(error), LOG_FIELD_MAX_BYTES);
                tracing::warn!(plugin = %self.plugin, %method, %url, %error, "plugin HTTP request failed")
            }
        }
        result
    }

    async fn run_action(&mut self, name: String) -> Result<ActionOutput, HostError> {
        let resolved = actions::resolve(
            &self.plugin,
            &name,
            &self.settings.grants.actions,
            &self.services.actions,
        );
        let spec = match resolved {
            Ok(spec) => spec.clone(),
            Err(error) => {
                if self.take_log_line() {
                    tracing::warn!(
                        plugin = %self.plugin,
                        action = %log_safe(&name, LOG_FIELD_MAX_BYTES),
                        error = %log_safe(&describe(&error), LOG_FIELD_MAX_BYTES),
                        "plugin action refused"
                    );
                }
                return Err(error);
            }
        };
        tracing::info!(plugin = %self.plugin, action = %name, argv = %spec.argv.join(" "), "running action");
        let result = actions::run(&spec, self.deadline).await;
        log_action_result(&self.plugin, &name, &result);
        result
    }
}

/// Runs a blocking state write (it fsyncs) on the blocking pool, not on an async worker;
/// `timed-out` at the call's deadline (the write itself still completes, or not, on its own).
async fn off_the_workers(
    write: impl FnOnce() -> Result<(), HostError> + Send + 'static,
    deadline: std::time::Instant,
) -> Result<(), HostError> {
    let task = tokio::task::spawn_blocking(write);
    match tokio::time::timeout_at(deadline.into(), task).await {
        Err(_elapsed) => Err(HostError::TimedOut),
        Ok(Err(join_error)) => Err(HostError::Failed(format!(
            "the state write failed: {join_error}"
        ))),
        Ok(Ok(result)) => result,
    }
}

fn log_action_result(plugin: &str, action: &str, result: &Result<ActionOutput, HostError>) {
    match result {
        Ok(output) => tracing::info!(
            plugin,
            action,
            exit_code = %output.exit_code.map_or_else(|| "killed by a signal".to_owned(), |code| code.to_string()),
            stdout = %log_safe(output.stdout.trim_end(), LOG_LINE_MAX_BYTES),
            stderr = %log_safe(output.stderr.trim_end(), LOG_LINE_MAX_BYTES),
            "action finished"
        ),
        Err(HostError::TimedOut) => tracing::warn!(
            plugin,
            action,
            "action killed: it ran past its timeout or the plugin's deadline"
        ),
        Err(error) => tracing::warn!(plugin, action, error = %describe(error), "action failed"),
    }
}

/// A host error as a log field reads it: `not granted: …`, `invalid: …`, `failed: …`,
/// `timed out` (never Rust's `Debug` form).
pub fn describe(error: &HostError) -> String {
    match error {
        HostError::NotGranted(text) => format!("not granted: {text}"),
        HostError::Invalid(text) => format!("invalid: {text}"),
        HostError::Failed(text) => format!("failed: {text}"),
        HostError::TimedOut => "timed out".to_owned(),
    }
}

/// Writes one plugin log line at the matching tracing level.
pub fn write_plugin_log(plugin: &str, level: Level, message: &str) {
    match level {
        Level::Trace => tracing::trace!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        Level::Debug => tracing::debug!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        Level::Info => tracing::info!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        Level::Warn => tracing::warn!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        Level::Error => tracing::error!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
    }
}

/// `text` made safe for one log line: control characters (newlines, carriage returns, ANSI
/// escapes) written escaped (`\n`, `\u{1b}`), so a plugin cannot forge or hide log lines,
/// and the result cut to at most `max_bytes` (a cut ends in `…`, which counts).
pub fn log_safe(text: &str, max_bytes: usize) -> String {
    let room = max_bytes.saturating_sub(ELLIPSIS.len());
    let mut safe = String::with_capacity(text.len().min(max_bytes));
    for character in text.chars() {
        let before = safe.len();
        if character.is_control() {
            safe.extend(character.escape_default());
        } else {
            safe.push(character);
        }
        if safe.len() > room {
            safe.truncate(before);
            safe.push_str(ELLIPSIS);
            return safe;
        }
    }
    safe
}

/// Marks text cut by `log_safe`.
const ELLIPSIS: &str = "…";

/// `text` cut to at most `max_bytes`, on a character boundary.
pub fn truncate(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::{log_safe, truncate};

    #[test]
    fn log_safe_escapes_control_characters() {
        assert_eq!(
            log_safe("ok\n2026-01-01T00:00:00Z INFO forged\r\u{1b}[2J", 200),
            "ok\\n2026-01-01T00:00:00Z INFO forged\\r\\u{1b}[2J"
        );
        assert_eq!(log_safe("plain text, ünïcode", 200), "plain text, ünïcode");
    }

    #[test]
    fn log_safe_caps_the_escaped_length() {
        let cut = log_safe(&"\n".repeat(1000), 100);
        assert!(cut.len() <= 100, "{} bytes", cut.len());
        assert!(cut.ends_with('…'), "{cut}");
        assert!(!cut.contains('\n'));
        let cut = log_safe(&"é".repeat(1000), 101);
        assert!(cut.len() <= 101 && cut.ends_with('…'), "{cut}");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("short", 100), "short");
    }
}

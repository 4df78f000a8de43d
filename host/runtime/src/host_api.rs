//! The `host` interface of the WIT contract as the daemon implements it: logging under the
//! plugin's name, config lookup, durable state, readiness, HTTP and actions; grants first.

use crate::actions;
use crate::bindings::forewarn::plugin::{host, types};
use crate::bindings::{ActionOutput, HostError, HttpRequest, HttpResponse, Level};
use crate::call_state::{CallState, LOG_LINE_MAX_BYTES, LOG_LINES_PER_CALL};
use crate::http;
use crate::plugin_log::PluginLogLine;

/// The target plugin log lines are written under, so operators can filter them.
pub const PLUGIN_LOG_TARGET: &str = "forewarn::plugin";

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: Level, message: String) {
        if self.log_lines >= LOG_LINES_PER_CALL {
            self.log_lines_dropped += 1;
            return;
        }
        self.log_lines += 1;
        let message = truncate(&message, LOG_LINE_MAX_BYTES);
        write_plugin_log(&self.plugin, level, message);
        self.logged.push(PluginLogLine::new(level.into(), message));
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.settings.config.get(&key).cloned()
    }

    fn state_get(&mut self, key: String) -> Option<Vec<u8>> {
        self.services.state.get(&self.plugin, &key)
    }

    fn state_set(&mut self, key: String, value: Vec<u8>) -> Result<(), HostError> {
        self.services
            .state
            .set(&self.plugin, &key, &value)
            .map_err(HostError::Invalid)
    }

    fn state_delete(&mut self, key: String) -> Result<(), HostError> {
        self.services
            .state
            .delete(&self.plugin, &key)
            .map_err(HostError::Failed)
    }

    fn set_ready(&mut self, ready: bool) -> Result<(), HostError> {
        if !self.settings.grants.readiness {
            return Err(HostError::NotGranted(format!(
                "plugin `{}` may not change readiness: add `readiness = true` under \
                 [capabilities] in its manifest",
                self.plugin
            )));
        }
        self.services.readiness.set(&self.plugin, ready);
        tracing::info!(plugin = %self.plugin, ready, "readiness changed by plugin");
        Ok(())
    }

    async fn http_send(&mut self, request: HttpRequest) -> Result<HttpResponse, HostError> {
        let url = http::check_allowed(&self.plugin, &request.url, &self.settings.grants.http)
            .inspect_err(|error| {
                tracing::warn!(plugin = %self.plugin, url = %request.url, ?error, "plugin HTTP request refused");
            })?;
        let method = request.method.clone();
        let result = http::send(&self.services.http, request, url.clone(), self.deadline).await;
        match &result {
            Ok(response) => {
                tracing::debug!(plugin = %self.plugin, %method, %url, status = response.status, "plugin HTTP request")
            }
            Err(error) => {
                tracing::warn!(plugin = %self.plugin, %method, %url, ?error, "plugin HTTP request failed")
            }
        }
        result
    }

    async fn run_action(&mut self, name: String) -> Result<ActionOutput, HostError> {
        let spec = actions::resolve(
            &self.plugin,
            &name,
            &self.settings.grants.actions,
            &self.services.actions,
        )
        .inspect_err(|error| {
            tracing::warn!(plugin = %self.plugin, action = %name, ?error, "plugin action refused");
        })?
        .clone();
        tracing::info!(plugin = %self.plugin, action = %name, argv = ?spec.argv, "running action");
        let result = actions::run(&spec, self.deadline).await;
        log_action_result(&self.plugin, &name, &result);
        result
    }
}

fn log_action_result(plugin: &str, action: &str, result: &Result<ActionOutput, HostError>) {
    match result {
        Ok(output) => tracing::info!(
            plugin,
            action,
            exit_code = %output.exit_code.map_or_else(|| "killed by a signal".to_owned(), |code| code.to_string()),
            stdout = %truncate(output.stdout.trim_end(), LOG_LINE_MAX_BYTES),
            stderr = %truncate(output.stderr.trim_end(), LOG_LINE_MAX_BYTES),
            "action finished"
        ),
        Err(HostError::TimedOut) => tracing::warn!(
            plugin,
            action,
            "action killed: it ran past its timeout or the plugin's deadline"
        ),
        Err(error) => tracing::warn!(plugin, action, ?error, "action failed"),
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
    use super::truncate;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("short", 100), "short");
    }
}

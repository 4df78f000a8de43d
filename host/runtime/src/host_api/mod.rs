//! The `host` interface of the latest WIT contract as the daemon implements it: logging under
//! the plugin's name, config, durable state, readiness, HTTP, actions, identity; grants first.

mod v0_1_0;

use crate::actions;
use crate::call_state::{CallState, LOG_FIELD_MAX_BYTES, LOG_LINE_MAX_BYTES};
use crate::grants::CapabilityGranter;
use crate::http;
use crate::plugin_log::{PluginLogLine, write_plugin_log};
use crate::services::StateStoreError;
use crate::text::log_safe;
use crate::wit::latest::forewarn::plugin::{host, types};
use crate::wit::latest::{AccessToken, ActionOutput, HostError, HttpRequest, HttpResponse, Level};

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: Level, message: String) {
        if !self.take_log_line() {
            return;
        }
        let level = level.into();
        let message = log_safe(&message, LOG_LINE_MAX_BYTES);
        write_plugin_log(&self.plugin, level, &message);
        self.logged.push(PluginLogLine::new(level, &message));
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.settings.config.get(&key).cloned()
    }

    fn state_get(&mut self, key: String) -> Option<Vec<u8>> {
        if self.refuse_while_preparing() {
            return None;
        }
        self.services.state.get(&self.plugin, &key)
    }

    async fn state_set(&mut self, key: String, value: Vec<u8>) -> Result<(), HostError> {
        self.not_while_preparing()?;
        self.take_state_write(key.len().saturating_add(value.len()))
            .map_err(host_error)?;
        let store = self.services.state.clone();
        let plugin = self.plugin.clone();
        let budget = self.state_disk_budget;
        let write = move || store.set(&plugin, &key, &value, budget).map_err(host_error);
        let written = off_the_workers(write, self.deadline).await?;
        self.state_disk_budget = budget.after(written);
        Ok(())
    }

    async fn state_delete(&mut self, key: String) -> Result<(), HostError> {
        self.not_while_preparing()?;
        self.take_state_write(key.len()).map_err(host_error)?;
        let store = self.services.state.clone();
        let plugin = self.plugin.clone();
        let budget = self.state_disk_budget;
        let write = move || store.delete(&plugin, &key, budget).map_err(host_error);
        let written = off_the_workers(write, self.deadline).await?;
        self.state_disk_budget = budget.after(written);
        Ok(())
    }

    fn set_ready(&mut self, ready: bool) -> Result<(), HostError> {
        self.not_while_preparing()?;
        self.granter().grant_readiness()?;
        if self.services.readiness.set(&self.plugin, ready) {
            tracing::info!(plugin = %self.plugin, ready, "readiness changed by plugin");
        }
        Ok(())
    }

    async fn http_send(&mut self, request: HttpRequest) -> Result<HttpResponse, HostError> {
        self.not_while_preparing()?;
        let granted = self.granter().grant_http(&request.url);
        let url = match granted {
            Ok(url) => url,
            Err(refused) => {
                let error = HostError::from(refused);
                if self.take_log_line() {
                    tracing::warn!(
                        plugin = %self.plugin,
                        url = %log_safe(&origin_of(&request.url), LOG_FIELD_MAX_BYTES),
                        error = %log_safe(&describe(&error), LOG_FIELD_MAX_BYTES),
                        "plugin HTTP request refused"
                    );
                }
                return Err(error);
            }
        };
        let method = log_safe(&request.method, LOG_FIELD_MAX_BYTES);
        let caller = http::Caller {
            plugin: &self.plugin,
            grants: &self.settings.grants,
        };
        let result = http::send(
            &self.services.http,
            caller,
            request,
            url.clone(),
            self.deadline,
        )
        .await;
        if !self.take_log_line() {
            return result;
        }
        let url = log_safe(&origin_of(url.as_str()), LOG_FIELD_MAX_BYTES);
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

    async fn azure_access_token(&mut self, resource: String) -> Result<AccessToken, HostError> {
        self.not_while_preparing()?;
        let granted = self.granter().grant_identity(&resource).map(str::to_owned);
        let granted = match granted {
            Ok(granted) => granted,
            Err(refused) => {
                let error = HostError::from(refused);
                if self.take_log_line() {
                    tracing::warn!(
                        plugin = %self.plugin,
                        resource = %log_safe(&resource, LOG_FIELD_MAX_BYTES),
                        error = %log_safe(&describe(&error), LOG_FIELD_MAX_BYTES),
                        "plugin identity token refused"
                    );
                }
                return Err(error);
            }
        };
        let identity = self.services.identity.clone();
        let result = identity_token(identity, &granted, self.deadline).await;
        if let Err(error) = &result
            && self.take_log_line()
        {
            tracing::warn!(
                plugin = %self.plugin,
                resource = %log_safe(&resource, LOG_FIELD_MAX_BYTES),
                error = %log_safe(&describe(error), LOG_FIELD_MAX_BYTES),
                "plugin identity token failed"
            );
        }
        result
    }

    async fn run_action(&mut self, name: String) -> Result<ActionOutput, HostError> {
        self.not_while_preparing()?;
        let granted = self.granter().grant_action(&name).map_err(HostError::from);
        let resolved =
            granted.and_then(|()| actions::defined(&self.plugin, &name, &self.services.actions));
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

impl CallState {
    /// Refuses a host function while the instance is made ahead of its call: such an
    /// instance is then not kept, and the call makes its own instance, where it is allowed.
    fn not_while_preparing(&mut self) -> Result<(), HostError> {
        if self.refuse_while_preparing() {
            return Err(HostError::Failed(
                "not available while the instance is being made ahead of its call".into(),
            ));
        }
        Ok(())
    }

    /// Answers this call's plugin's capability requests from its grants.
    fn granter(&self) -> CapabilityGranter<'_> {
        CapabilityGranter::new(&self.plugin, &self.settings.grants)
    }
}

/// What of a plugin's URL the log shows: `scheme://host:port`, never the path or query
/// (webhook and SAS URLs carry their secret there). Unparsable text is not shown at all.
fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => parsed.origin().ascii_serialization(),
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// The identity token for an already granted `resource`, bounded by the call's deadline.
async fn identity_token(
    identity: Option<std::sync::Arc<crate::identity::ManagedIdentity>>,
    resource: &str,
    deadline: std::time::Instant,
) -> Result<AccessToken, HostError> {
    let Some(identity) = identity else {
        return Err(HostError::Failed(
            "this daemon hands out no managed-identity tokens (it was built without an \
             identity endpoint)"
                .to_owned(),
        ));
    };
    let fetch = identity.token(resource, std::time::SystemTime::now);
    match tokio::time::timeout_at(deadline.into(), fetch).await {
        Err(_elapsed) => Err(HostError::TimedOut),
        Ok(result) => result,
    }
}

/// Runs a blocking state write (it fsyncs) on the blocking pool, not on an async worker;
/// `timed-out` at the call's deadline (the write itself still completes, or not, on its own).
/// Ok holds the bytes the write put on disk.
async fn off_the_workers(
    write: impl FnOnce() -> Result<u64, HostError> + Send + 'static,
    deadline: std::time::Instant,
) -> Result<u64, HostError> {
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
fn describe(error: &HostError) -> String {
    match error {
        HostError::NotGranted(text) => format!("not granted: {text}"),
        HostError::Invalid(text) => format!("invalid: {text}"),
        HostError::Failed(text) => format!("failed: {text}"),
        HostError::TimedOut => "timed out".to_owned(),
    }
}
/// How a state store's error reaches the plugin: a rule it broke is `invalid`, a store
/// that failed is `failed`.
fn host_error(error: StateStoreError) -> HostError {
    match error {
        StateStoreError::Refused(message) => HostError::Invalid(message),
        StateStoreError::Failed(message) => HostError::Failed(message),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::origin_of;
    use crate::call_state::CallState;
    use crate::call_state::STATE_WRITES_PER_CALL;
    use crate::services::{
        DiskBudget, HostServices, MemoryStateStore, PluginSettings, STATE_DISK_BYTES_PER_CALL,
        StateStore, StateStoreError,
    };
    use crate::wit::latest::HostError;
    use crate::wit::latest::forewarn::plugin::host::Host;

    fn state(preparing: bool) -> CallState {
        let services = HostServices {
            state: Arc::new(MemoryStateStore::default()),
            ..HostServices::default()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut state = CallState::new(
            Arc::from("probe"),
            Arc::new(PluginSettings::default()),
            services,
            deadline,
        );
        state.preparing = preparing;
        state
    }

    #[tokio::test]
    async fn an_instance_being_made_ahead_can_neither_act_nor_read_state() {
        let mut preparing = state(true);
        assert_eq!(preparing.state_get("k".into()), None);
        assert!(preparing.host_called_while_preparing);
        let refused = |result: Result<(), HostError>| {
            assert!(matches!(result, Err(HostError::Failed(_))), "{result:?}")
        };
        refused(preparing.state_set("k".into(), b"v".to_vec()).await);
        refused(preparing.state_delete("k".into()).await);
        refused(preparing.set_ready(false));
        refused(preparing.run_action("stop".into()).await.map(drop));
        refused(
            preparing
                .azure_access_token("https://storage.azure.com/".into())
                .await
                .map(drop),
        );
        // The same store once its call has begun: state is read and written as usual.
        preparing.preparing = false;
        preparing
            .state_set("k".into(), b"v".to_vec())
            .await
            .expect("state-set during the call");
        assert_eq!(preparing.state_get("k".into()), Some(b"v".to_vec()));
        // A store made at the call never was preparing.
        let mut calling = state(false);
        assert_eq!(calling.state_get("k".into()), None);
        assert!(!calling.host_called_while_preparing);
    }

    /// A store whose every write rewrites a file of `FILE_BYTES`, as the daemon's does
    /// once a plugin holds its full quota, refusing what the budget does not allow.
    struct WholeFileStore;

    const FILE_BYTES: u64 = 1024 * 1024;

    impl StateStore for WholeFileStore {
        fn get(&self, _plugin: &str, _key: &str) -> Option<Vec<u8>> {
            None
        }

        fn set(&self, _: &str, _: &str, _: &[u8], budget: DiskBudget) -> WriteResult {
            match budget.allows(FILE_BYTES) {
                true => Ok(FILE_BYTES),
                false => Err(StateStoreError::Refused("over the disk budget".into())),
            }
        }

        fn delete(&self, plugin: &str, key: &str, budget: DiskBudget) -> WriteResult {
            self.set(plugin, key, b"", budget)
        }
    }

    type WriteResult = Result<u64, StateStoreError>;

    #[tokio::test]
    async fn a_call_writes_to_disk_no_more_than_its_budget() {
        let mut call = state(false);
        call.services.state = Arc::new(WholeFileStore);
        let mut written = 0;
        for index in 0..STATE_WRITES_PER_CALL {
            let write = match index % 2 {
                0 => call.state_set("k".into(), vec![1]).await,
                _ => call.state_delete("k".into()).await,
            };
            match write {
                Ok(()) => written += FILE_BYTES,
                Err(HostError::Invalid(_)) => break,
                Err(error) => panic!("write {index}: {error:?}"),
            }
        }
        assert_eq!(written, STATE_DISK_BYTES_PER_CALL);
    }

    #[test]
    fn logged_urls_keep_only_scheme_host_and_port() {
        let rows = [
            (
                "https://hooks.slack.com/services/T000/B000/XXXXSECRET",
                "https://hooks.slack.com",
            ),
            (
                "https://prod.westeurope.logic.azure.com:443/workflows/1/triggers?sig=SECRET",
                "https://prod.westeurope.logic.azure.com",
            ),
            (
                "http://127.0.0.1:8080/drain?token=x",
                "http://127.0.0.1:8080",
            ),
            ("not a url with SECRET", "(not a URL)"),
        ];
        for (url, logged) in rows {
            assert_eq!(origin_of(url), logged);
        }
    }
}

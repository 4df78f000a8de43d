//! The `host` interface of the latest WIT contract as the daemon implements it: the glue
//! between the generated bindings and the capability units (`capabilities/`), which hold each
//! host function's body, its grant check and its service. Logging and config live here: every
//! plugin has them, whatever its grants.

mod v0_1_0;
mod v0_2_0;

use crate::call_state::{CallState, LOG_LINE_MAX_BYTES};
use crate::capabilities::{actions, http, identity, key_value, readiness};
use crate::plugin_log::{PluginLogLine, write_plugin_log};
use crate::wit::latest::forewarn::plugin::{host, types};
use crate::wit::latest::{
    AccessToken, ActionOutput, DrainStatus, HostError, HttpRequest, HttpResponse, Level,
};
use forewarn_events::log_safe;

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
        key_value::get(self, &key)
    }

    async fn state_set(&mut self, key: String, value: Vec<u8>) -> Result<(), HostError> {
        key_value::set(self, key, value).await
    }

    async fn state_delete(&mut self, key: String) -> Result<(), HostError> {
        key_value::delete(self, key).await
    }

    fn set_ready(&mut self, ready: bool) -> Result<(), HostError> {
        readiness::set_ready(self, ready)
    }

    fn drain_progress(&mut self, unhealthy_threshold: u32) -> Result<DrainStatus, HostError> {
        readiness::drain_progress(self, unhealthy_threshold)
    }

    async fn http_send(&mut self, request: HttpRequest) -> Result<HttpResponse, HostError> {
        http::http_send(self, request).await
    }

    async fn azure_access_token(&mut self, resource: String) -> Result<AccessToken, HostError> {
        identity::azure_access_token(self, resource).await
    }

    async fn run_action(&mut self, name: String) -> Result<ActionOutput, HostError> {
        actions::run_action(self, name).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::capabilities::key_value::MemoryKeyValueStore;
    use crate::capabilities::testing::call;
    use crate::services::HostServices;
    use crate::wit::latest::HostError;
    use crate::wit::latest::forewarn::plugin::host::Host;
    use forewarn_manifest::Capabilities;

    fn state(preparing: bool) -> crate::call_state::CallState {
        let services = HostServices {
            key_value: Arc::new(MemoryKeyValueStore::default()),
            ..HostServices::default()
        };
        let mut state = call(Capabilities::default(), services);
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
}

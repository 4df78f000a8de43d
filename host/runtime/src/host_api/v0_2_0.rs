//! The host calls of contract 0.2.0, served by the latest implementation: each converts its
//! arguments and results between the frozen 0.2.0 types and the latest ones.

use crate::call_state::CallState;
use crate::wit::latest::forewarn::plugin::host::Host as LatestHost;
use crate::wit::v0_2_0::{host, types};

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: host::Level, message: String) {
        LatestHost::log(self, level.into(), message)
    }

    fn config(&mut self, key: String) -> Option<String> {
        LatestHost::config(self, key)
    }

    fn state_get(&mut self, key: String) -> Option<Vec<u8>> {
        LatestHost::state_get(self, key)
    }

    async fn state_set(&mut self, key: String, value: Vec<u8>) -> Result<(), host::HostError> {
        LatestHost::state_set(self, key, value)
            .await
            .map_err(Into::into)
    }

    async fn state_delete(&mut self, key: String) -> Result<(), host::HostError> {
        LatestHost::state_delete(self, key)
            .await
            .map_err(Into::into)
    }

    fn set_ready(&mut self, ready: bool) -> Result<(), host::HostError> {
        LatestHost::set_ready(self, ready).map_err(Into::into)
    }

    async fn http_send(
        &mut self,
        request: host::HttpRequest,
    ) -> Result<host::HttpResponse, host::HostError> {
        LatestHost::http_send(self, request.into())
            .await
            .map(Into::into)
            .map_err(Into::into)
    }

    async fn azure_access_token(
        &mut self,
        resource: String,
    ) -> Result<host::AccessToken, host::HostError> {
        LatestHost::azure_access_token(self, resource)
            .await
            .map(Into::into)
            .map_err(Into::into)
    }

    async fn run_action(&mut self, name: String) -> Result<host::ActionOutput, host::HostError> {
        LatestHost::run_action(self, name)
            .await
            .map(Into::into)
            .map_err(Into::into)
    }
}

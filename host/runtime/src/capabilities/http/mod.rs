//! Outgoing HTTP: `http-send` reaches only the `host:port` pairs the manifest grants
//! (`http = ["host:port"]` under `[capabilities]`), never a forbidden address (link-local,
//! the IMDS endpoint, the daemon's own listeners), over TLS verified against the system's CAs
//! and the plugin's `http-ca-file`, the response cut at `http-response-limit`.

pub(crate) mod client;
mod grant;
#[cfg(test)]
mod https_tests;
pub mod network;
mod tls;

pub use client::HttpClient;
pub(crate) use client::{Caller, send};
pub(crate) use grant::grant;

use super::log_text::describe;
use crate::call_state::{CallState, LOG_FIELD_MAX_BYTES};
use crate::wit::latest::{HostError, HttpRequest, HttpResponse};
use forewarn_events::log_safe;

/// The host function `http-send`: the grant, then the request; one log line either way.
pub(crate) async fn http_send(
    call: &mut CallState,
    request: HttpRequest,
) -> Result<HttpResponse, HostError> {
    call.not_while_preparing()?;
    let url = match grant(&call.plugin, &call.settings.grants, &request.url) {
        Ok(url) => url,
        Err(error) => {
            if call.take_log_line() {
                tracing::warn!(
                    plugin = %call.plugin,
                    url = %log_safe(&origin_of(&request.url), LOG_FIELD_MAX_BYTES),
                    error = %log_safe(&describe(&error), LOG_FIELD_MAX_BYTES),
                    "plugin HTTP request refused"
                );
            }
            return Err(error);
        }
    };
    let method = log_safe(&request.method, LOG_FIELD_MAX_BYTES);
    let caller = Caller {
        plugin: &call.plugin,
        grants: &call.settings.grants,
    };
    let result = send(
        &call.services.http,
        caller,
        request,
        url.clone(),
        call.deadline,
    )
    .await;
    if !call.take_log_line() {
        return result;
    }
    let url = log_safe(&origin_of(url.as_str()), LOG_FIELD_MAX_BYTES);
    match &result {
        Ok(response) => {
            tracing::debug!(plugin = %call.plugin, %method, %url, status = response.status, "plugin HTTP request")
        }
        Err(error) => {
            let error = log_safe(&describe(error), LOG_FIELD_MAX_BYTES);
            tracing::warn!(plugin = %call.plugin, %method, %url, %error, "plugin HTTP request failed")
        }
    }
    result
}

/// What of a plugin's URL the log shows: `scheme://host:port`, never the path or query
/// (webhook and SAS URLs carry their secret there). Unparsable text is not shown at all.
fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => parsed.origin().ascii_serialization(),
        Err(_) => "(not a URL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::testing::{call, grants};
    use crate::services::HostServices;

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

    #[tokio::test]
    async fn http_send_reaches_a_granted_listener_and_nothing_else() {
        let (address, server) = client::tests::recording_server().await;
        let services = HostServices::default();
        let url = format!("http://{address}/ping");
        let mut refused = call(grants(false, &[], &[]), services.clone());
        let answer = http_send(&mut refused, client::tests::get_request(&url)).await;
        assert!(
            matches!(answer, Err(HostError::NotGranted(_))),
            "{answer:?}"
        );

        let mut granted = call(grants(false, &[&address.to_string()], &[]), services);
        let response = http_send(&mut granted, client::tests::get_request(&url))
            .await
            .expect("granted");
        assert_eq!(
            (response.status, response.body.as_slice()),
            (200, b"ok".as_slice())
        );
        let head = server.await.expect("the server read the request");
        assert!(head.starts_with("get /ping http/1.1"), "{head}");
    }
}

//! Managed-identity tokens: `azure-access-token` hands a plugin a token of the VM's managed
//! identity for a resource its manifest grants (`azure-identity = ["resource"]` under
//! `[capabilities]`), from the daemon's cache ([`token_cache`]).

pub(crate) mod token_cache;

use std::sync::Arc;
use std::time::SystemTime;

pub use token_cache::{
    IssuedToken, ManagedIdentity, TOKEN_RENEW_BEFORE, TokenFetchError, TokenFetcher, TokenFuture,
};

use super::log_text::describe;
use crate::call_state::{CallState, LOG_FIELD_MAX_BYTES};
use crate::wit::latest::{AccessToken, HostError};
use forewarn_events::log_safe;
use forewarn_manifest::Capabilities;

/// The manifest's spelling of `resource` when `plugin`'s grants name it. Resources compare
/// without regard to case or a trailing slash, as Azure's audiences do; tokens are fetched and
/// cached under the manifest's spelling, so a plugin cannot multiply fetches by respelling it.
pub(crate) fn grant<'a>(
    plugin: &str,
    grants: &'a Capabilities,
    resource: &str,
) -> Result<&'a str, HostError> {
    let wanted = audience(resource);
    let granted = grants
        .azure_identity
        .iter()
        .find(|entry| audience(entry).eq_ignore_ascii_case(wanted));
    if let Some(entry) = granted
        && !wanted.is_empty()
    {
        return Ok(entry.as_str());
    }
    Err(HostError::NotGranted(format!(
        "plugin `{plugin}` may not ask for access tokens for `{resource}`: add \"{resource}\" to \
         [capabilities] azure-identity in {plugin}.toml"
    )))
}

/// A resource without surrounding blanks and trailing slashes.
fn audience(resource: &str) -> &str {
    resource.trim().trim_end_matches('/')
}

/// The host function `azure-access-token`: the grant, then the (cached) token, bounded by
/// the call's deadline.
pub(crate) async fn azure_access_token(
    call: &mut CallState,
    resource: String,
) -> Result<AccessToken, HostError> {
    call.not_while_preparing()?;
    let granted = grant(&call.plugin, &call.settings.grants, &resource).map(str::to_owned);
    let result = match granted {
        Ok(granted) => token_before(call.services.identity.clone(), &granted, call.deadline).await,
        Err(error) => Err(error),
    };
    if let Err(error) = &result
        && call.take_log_line()
    {
        let refused = matches!(error, HostError::NotGranted(_));
        let resource = log_safe(&resource, LOG_FIELD_MAX_BYTES);
        let error = log_safe(&describe(error), LOG_FIELD_MAX_BYTES);
        match refused {
            true => {
                tracing::warn!(plugin = %call.plugin, %resource, %error, "plugin identity token refused")
            }
            false => {
                tracing::warn!(plugin = %call.plugin, %resource, %error, "plugin identity token failed")
            }
        }
    }
    result
}

/// The token for an already granted `resource`, `timed-out` at `deadline`.
async fn token_before(
    identity: Option<Arc<ManagedIdentity>>,
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
    let fetch = identity.token(resource, SystemTime::now);
    match tokio::time::timeout_at(deadline.into(), fetch).await {
        Err(_elapsed) => Err(HostError::TimedOut),
        Ok(result) => result,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::capabilities::testing::{Expected, call, check_rows, grants};
    use crate::services::HostServices;

    #[test]
    fn identity_tokens_are_granted_per_resource_without_regard_to_a_trailing_slash() {
        let storage = Capabilities {
            azure_identity: vec!["https://storage.azure.com/".to_owned()],
            ..Capabilities::default()
        };
        let nothing = grants(true, &["127.0.0.1:80"], &["stop-app"]);
        let rows = [
            (&storage, "https://storage.azure.com/", Expected::Granted),
            (&storage, "https://storage.azure.com", Expected::Granted),
            (&storage, "https://STORAGE.azure.com/", Expected::Granted),
            (
                &storage,
                "https://vault.azure.net",
                Expected::Refused(
                    "plugin `p` may not ask for access tokens for `https://vault.azure.net`: \
                     add \"https://vault.azure.net\" to [capabilities] azure-identity in p.toml",
                ),
            ),
            (&storage, "", Expected::Refused("azure-identity")),
            (
                &nothing,
                "https://storage.azure.com/",
                Expected::Refused(""),
            ),
        ];
        check_rows(&rows, |grants, resource| {
            grant("p", grants, resource).map(str::to_owned)
        });
        for spelling in ["https://storage.azure.com//", "HTTPS://Storage.Azure.com"] {
            assert_eq!(
                grant("p", &storage, spelling),
                Ok("https://storage.azure.com/"),
                "tokens are fetched under the manifest's spelling"
            );
        }
    }

    #[tokio::test]
    async fn azure_access_token_hands_out_a_granted_resources_token_fetched_once() {
        let fetcher = Arc::new(CountingFetcher::default());
        let services = HostServices {
            identity: Some(Arc::new(ManagedIdentity::new(fetcher.clone()))),
            ..HostServices::default()
        };
        let storage = Capabilities {
            azure_identity: vec!["https://storage.azure.com/".to_owned()],
            ..Capabilities::default()
        };
        let mut granted = call(storage.clone(), services.clone());
        for spelling in ["https://storage.azure.com/", "HTTPS://storage.azure.com"] {
            let token = azure_access_token(&mut granted, spelling.into())
                .await
                .expect("granted");
            assert_eq!(token.token, "https://storage.azure.com/#token-1");
        }
        let refused = azure_access_token(&mut granted, "https://vault.azure.net".into()).await;
        assert!(
            matches!(refused, Err(HostError::NotGranted(_))),
            "{refused:?}"
        );
        assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 1);

        let mut without_identity = call(storage, HostServices::default());
        let failed =
            azure_access_token(&mut without_identity, "https://storage.azure.com/".into()).await;
        assert!(
            matches!(&failed, Err(HostError::Failed(message)) if message.contains("no managed-identity tokens")),
            "{failed:?}"
        );
    }

    /// Issues "RESOURCE#token-N" (N = the fetch count), living an hour from now.
    #[derive(Default)]
    struct CountingFetcher {
        fetches: AtomicUsize,
    }

    impl TokenFetcher for CountingFetcher {
        fn fetch(&self, resource: &str) -> TokenFuture {
            let count = self.fetches.fetch_add(1, Ordering::SeqCst) + 1;
            let answer = Ok(IssuedToken {
                token: format!("{resource}#token-{count}"),
                expires_on: SystemTime::now() + Duration::from_secs(3600),
            });
            Box::pin(async move { answer })
        }
    }
}

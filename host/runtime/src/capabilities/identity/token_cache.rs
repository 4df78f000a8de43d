//! The tokens of the VM's managed identity: fetched by the daemon through a [`TokenFetcher`],
//! cached per resource and renewed shortly before expiry, so plugins asking together cause
//! one fetch.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::mutex::lock;
use crate::wit::latest::{AccessToken, HostError};

/// A cached token is fetched again when less than this is left of its life (or less than
/// half its life, for tokens issued for less than twice this).
pub const TOKEN_RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);

/// A token as the identity endpoint issued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The bearer token.
    pub token: String,
    /// When it expires.
    pub expires_on: SystemTime,
}

/// What a token fetch may return: the token, or why it failed.
pub type TokenFuture = Pin<Box<dyn Future<Output = Result<IssuedToken, TokenFetchError>> + Send>>;

/// Why the identity endpoint gave no token: the fetcher's own error (the daemon's IMDS
/// client's), kept whole; shown as its one line.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct TokenFetchError(pub Box<dyn std::error::Error + Send + Sync>);

/// Fetches a new token for a resource from the identity endpoint (the daemon's IMDS client).
pub trait TokenFetcher: Send + Sync {
    /// A new token for `resource` ("https://storage.azure.com/").
    fn fetch(&self, resource: &str) -> TokenFuture;
}

/// The tokens of one daemon's managed identity, shared by every plugin: a resource's token
/// is fetched once and handed to every plugin granted it until it nears expiry.
pub struct ManagedIdentity {
    fetcher: Arc<dyn TokenFetcher>,
    /// Each resource's token and when it was fetched.
    cache: Mutex<HashMap<String, (IssuedToken, SystemTime)>>,
    /// One fetch at a time per resource: plugins asking together wait for the first one's
    /// token, and a slow resource holds up no other.
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl ManagedIdentity {
    /// Tokens from `fetcher`.
    pub fn new(fetcher: Arc<dyn TokenFetcher>) -> Self {
        ManagedIdentity {
            fetcher,
            cache: Mutex::new(HashMap::new()),
            fetching: Mutex::new(HashMap::new()),
        }
    }

    /// A token for `resource` valid for at least [`TOKEN_RENEW_BEFORE`] from `now` when the
    /// endpoint issues such tokens: from the cache, or fetched.
    pub(crate) async fn token(
        &self,
        resource: &str,
        now: impl Fn() -> SystemTime,
    ) -> Result<AccessToken, HostError> {
        if let Some(token) = self.cached(resource, now()) {
            return Ok(token);
        }
        let resource_lock = lock(&self.fetching)
            .entry(resource.to_owned())
            .or_default()
            .clone();
        let _one_fetch = resource_lock.lock().await;
        if let Some(token) = self.cached(resource, now()) {
            return Ok(token);
        }
        let fetched_at = now();
        let issued = self.fetcher.fetch(resource).await.map_err(|reason| {
            HostError::Failed(format!(
                "the VM's managed identity gave no token for `{resource}`: {reason}"
            ))
        })?;
        let token = access_token(&issued);
        lock(&self.cache).insert(resource.to_owned(), (issued, fetched_at));
        Ok(token)
    }

    /// The cached token of `resource` while it is not due for renewal.
    fn cached(&self, resource: &str, now: SystemTime) -> Option<AccessToken> {
        let cache = lock(&self.cache);
        let (issued, fetched_at) = cache.get(resource)?;
        let left = issued.expires_on.duration_since(now).ok()?;
        let lifetime = issued
            .expires_on
            .duration_since(*fetched_at)
            .unwrap_or_default();
        (left > TOKEN_RENEW_BEFORE.min(lifetime / 2)).then(|| access_token(issued))
    }
}

fn access_token(issued: &IssuedToken) -> AccessToken {
    let expires_on_unix_ms = forewarn_events::unix_ms(issued.expires_on);
    AccessToken {
        token: issued.token.clone(),
        expires_on_unix_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::UNIX_EPOCH;

    /// Issues "token-N" (N = the fetch count) living `lifetime` from `issued_at`.
    struct CountingFetcher {
        fetches: AtomicUsize,
        issued_at: SystemTime,
        lifetime: Duration,
        fail: bool,
    }

    impl TokenFetcher for CountingFetcher {
        fn fetch(&self, resource: &str) -> TokenFuture {
            let count = self.fetches.fetch_add(1, Ordering::SeqCst) + 1;
            let answer = if self.fail {
                Err(TokenFetchError("no identity is assigned to this VM".into()))
            } else {
                Ok(IssuedToken {
                    token: format!("{resource}#token-{count}"),
                    expires_on: self.issued_at + self.lifetime,
                })
            };
            Box::pin(async move { answer })
        }
    }

    fn identity(lifetime: Duration, fail: bool) -> (ManagedIdentity, Arc<CountingFetcher>) {
        let fetcher = Arc::new(CountingFetcher {
            fetches: AtomicUsize::new(0),
            issued_at: UNIX_EPOCH + Duration::from_secs(1_000_000),
            lifetime,
            fail,
        });
        (ManagedIdentity::new(fetcher.clone()), fetcher)
    }

    #[tokio::test]
    async fn a_token_is_fetched_once_per_resource_and_renewed_before_expiry() {
        let (identity, fetcher) = identity(Duration::from_secs(3600), false);
        let start = fetcher.issued_at;
        let at = |offset: u64| move || start + Duration::from_secs(offset);
        let storage = "https://storage.azure.com/";
        let first = identity.token(storage, at(0)).await.unwrap();
        let again = identity.token(storage, at(10)).await.unwrap();
        assert_eq!(first, again);
        assert_eq!(first.token, "https://storage.azure.com/#token-1");
        assert_eq!(first.expires_on_unix_ms, (1_000_000 + 3600) * 1000);
        let vault = identity
            .token("https://vault.azure.net", at(20))
            .await
            .unwrap();
        assert_eq!(vault.token, "https://vault.azure.net#token-2");
        // 4 minutes before expiry: inside the renewal window.
        let renewed = identity.token(storage, at(3600 - 240)).await.unwrap();
        assert_eq!(renewed.token, "https://storage.azure.com/#token-3");
        assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_short_lived_token_is_kept_for_half_its_life() {
        let (identity, fetcher) = identity(Duration::from_secs(120), false);
        let start = fetcher.issued_at;
        let at = |offset: u64| move || start + Duration::from_secs(offset);
        let storage = "https://storage.azure.com/";
        let first = identity.token(storage, at(0)).await.unwrap();
        assert_eq!(identity.token(storage, at(59)).await.unwrap(), first);
        assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 1);
        let renewed = identity.token(storage, at(61)).await.unwrap();
        assert_ne!(renewed, first);
        assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 2);
    }

    /// Never answers for `slow`; issues a token at once for anything else.
    struct OneSlowResource;

    impl TokenFetcher for OneSlowResource {
        fn fetch(&self, resource: &str) -> TokenFuture {
            let slow = resource == "slow";
            let token = IssuedToken {
                token: format!("{resource}-token"),
                expires_on: SystemTime::now() + Duration::from_secs(3600),
            };
            Box::pin(async move {
                if slow {
                    std::future::pending::<()>().await;
                }
                Ok(token)
            })
        }
    }

    #[tokio::test]
    async fn a_resource_whose_fetch_hangs_holds_up_no_other() {
        let identity = Arc::new(ManagedIdentity::new(Arc::new(OneSlowResource)));
        let hanging = tokio::spawn({
            let identity = identity.clone();
            async move { identity.token("slow", SystemTime::now).await }
        });
        tokio::task::yield_now().await;
        let storage = identity.token("storage", SystemTime::now).await.unwrap();
        assert_eq!(storage.token, "storage-token");
        assert!(!hanging.is_finished());
        hanging.abort();
    }

    #[tokio::test]
    async fn a_failed_fetch_is_failed_and_not_cached() {
        let (identity, fetcher) = identity(Duration::from_secs(3600), true);
        let now = || fetcher.issued_at;
        for _ in 0..2 {
            let error = identity
                .token("https://storage.azure.com/", now)
                .await
                .unwrap_err();
            let HostError::Failed(text) = error else {
                panic!("expected failed, got {error:?}");
            };
            assert!(text.contains("no identity is assigned"), "{text}");
        }
        assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 2);
    }
}

//! The etcd v3 client over the JSON gateway that etcd serves beside gRPC (`/v3/…`):
//! leases, puts, prefix reads, deletes, transactions and authentication.
//!
//! The gateway speaks protobuf-as-JSON: keys and values are base64, 64-bit integers are
//! strings, and fields at their default value (false, 0, empty) are left out of answers.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::StatusCode;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::settings::{Credentials, EtcdSettings, Setting, SettingsError};
use gateway_wire::{
    Int, RangeAnswer, compare_body, describe_error, encode, encode_bytes, gateway_error_message,
    prefix_end, put_body, truncate, write_body,
};

/// How long one request to etcd may take before the endpoint counts as unreachable.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest answer read from etcd (forewarn's keys for one event are a few hundred
/// bytes); a longer one is refused, naming this cap.
pub const ETCD_BODY_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The gateway path that exchanges [`Credentials`] for a token.
pub const AUTH_PATH: &str = "/v3/auth/authenticate";

/// The gateway path of a member's own status (its leader, if it knows one), answered
/// without a quorum.
const STATUS_PATH: &str = "/v3/maintenance/status";

/// What went wrong talking to etcd. Its text names settings by their own names
/// (`endpoints`, `ca-file`); [`EtcdError::describe`] names them as keys of a config section.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint answered (connection refused, timeout, TLS failure, an oversized answer).
    #[error("{}", self.describe(""))]
    Unreachable {
        /// The endpoint tried last.
        endpoint: String,
        /// The cause, with its own causes.
        message: String,
        /// Whether the cause is a certificate (then the TLS files are worth checking).
        certificate: bool,
    },
    /// etcd answered with an HTTP error.
    #[error("{}", self.describe(""))]
    Refused {
        /// The endpoint that answered.
        endpoint: String,
        /// The gateway path asked, e.g. `/v3/kv/put`.
        path: String,
        /// The HTTP status.
        status: u16,
        /// etcd's message.
        message: String,
    },
    /// etcd's answer could not be read.
    #[error("{}", self.describe(""))]
    Malformed {
        /// The endpoint that answered.
        endpoint: String,
        /// The gateway path asked.
        path: String,
        /// What could not be read, with the start of the answer.
        message: String,
    },
    /// Members answer, but none of them knows a leader: the cluster lost its quorum (more
    /// than half of its members are down or cannot reach each other), so it can neither
    /// write nor read linearizably.
    #[error("{}", self.describe(""))]
    NoQuorum {
        /// The endpoints whose members answered without a leader.
        answering: Vec<String>,
        /// The endpoints that did not answer at all.
        silent: Vec<String>,
        /// The failure of the request that found it, as [`EtcdError::describe`] says it.
        cause: String,
    },
    /// The settings cannot work, or the TLS files cannot be used.
    #[error("{}", self.describe(""))]
    Settings(#[from] SettingsError),
    /// A request could not be built.
    #[error("{}", self.describe(""))]
    Setup(String),
}

/// What the members' status says of a request every endpoint failed.
enum Outage {
    /// A member knows a leader: the failure was passing (an election), or is something else.
    LeaderKnown(EtcdError),
    /// Members answer and none knows a leader.
    NoQuorum(EtcdError),
    /// No member answered its status.
    Unexplained(EtcdError),
}

impl Outage {
    fn into_error(self) -> EtcdError {
        match self {
            Outage::LeaderKnown(error) | Outage::NoQuorum(error) | Outage::Unexplained(error) => {
                error
            }
        }
    }
}

impl EtcdError {
    /// [`EtcdError::Unreachable`]: `endpoint` did not answer because of `message`.
    fn unreachable(endpoint: &str, message: String) -> EtcdError {
        EtcdError::Unreachable {
            endpoint: endpoint.to_owned(),
            certificate: message.contains("certificate"),
            message,
        }
    }

    /// Whether the error is about one endpoint, so the next one is worth trying: it did not
    /// answer, or its member answered that it cannot serve now (HTTP 5xx: no leader, a
    /// request that timed out inside etcd, its gateway cut off from its own gRPC server).
    fn is_endpoint_failure(&self) -> bool {
        match self {
            EtcdError::Unreachable { .. } => true,
            EtcdError::Refused { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// The error's text with settings named as keys of `section` (`coordination.endpoints`),
    /// or by their own names when `section` is empty (that is the `Display` text).
    pub fn describe(&self, section: &str) -> String {
        let key = |setting: Setting| setting.key(section);
        match self {
            EtcdError::Unreachable {
                endpoint,
                message,
                certificate,
            } => {
                let hint = if *certificate {
                    format!(
                        " (check `{}`, `{}` and `{}`)",
                        key(Setting::CaFile),
                        Setting::CertFile.name(),
                        Setting::KeyFile.name()
                    )
                } else {
                    String::new()
                };
                format!(
                    "cannot reach etcd at {endpoint}: {message}{hint} (is etcd running, and is \
                     `{}` right?)",
                    key(Setting::Endpoints)
                )
            }
            EtcdError::Refused {
                endpoint,
                path,
                status,
                message,
            } => {
                let hint = if path == AUTH_PATH {
                    format!(
                        " (check `{}` and `{}`)",
                        key(Setting::Username),
                        key(Setting::Password)
                    )
                } else {
                    String::new()
                };
                format!("etcd at {endpoint} refused {path} with HTTP {status}: {message}{hint}")
            }
            EtcdError::Malformed {
                endpoint,
                path,
                message,
            } => format!(
                "etcd at {endpoint} sent an answer to {path} that forewarn cannot read: {message}"
            ),
            EtcdError::NoQuorum {
                answering,
                silent,
                cause,
            } => {
                let silent = if silent.is_empty() {
                    String::new()
                } else {
                    format!("; {} do(es) not answer", silent.join(", "))
                };
                format!(
                    "etcd has lost its quorum: {} answer(s) but know(s) no leader{silent}. etcd \
                     needs a majority of its members up and connected to each other: start the \
                     members that are down (with their data directories) or repair the network \
                     between them (last error: {cause})",
                    answering.join(", ")
                )
            }
            EtcdError::Settings(error) => error.render(section),
            EtcdError::Setup(message) => format!("cannot set up the etcd client: {message}"),
        }
    }
}

/// One key as read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// The lease the key is attached to; 0 for none.
    pub lease: i64,
    /// The revision of the key's last write (etcd's `mod_revision`): a key written again,
    /// by anyone, has a later one. Every write of one transaction has the same revision.
    pub mod_revision: i64,
}

/// A condition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    /// The key does not exist.
    Absent(String),
    /// The key exists.
    Present(String),
    /// The key exists with exactly this value.
    ValueIs(String, String),
    /// The key's last write was at this revision (`mod_revision`); 0: the key does not exist.
    ModRevisionIs(String, i64),
}

/// A write of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Puts `value` at `key`, attached to `lease` when not 0.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The lease to attach the key to; 0 for none.
        lease: i64,
    },
    /// Deletes one key.
    Delete(String),
}

/// The HTTP/1.1 client under [`EtcdClient`]: `http://` or `https://` (rustls), no proxy.
type HttpClient = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An etcd client that tries each endpoint in turn, starting with the last one that worked.
#[derive(Debug)]
pub struct EtcdClient {
    http: HttpClient,
    endpoints: Vec<String>,
    preferred: AtomicUsize,
    credentials: Option<Credentials>,
    token: Mutex<Option<String>>,
}

impl EtcdClient {
    /// A client for `settings` (checked, and its TLS files read), never through a proxy.
    /// Nothing is sent yet: etcd need not be reachable.
    pub fn connect(settings: &EtcdSettings) -> Result<EtcdClient, EtcdError> {
        let tls = crate::tls::client_config(settings)?;
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(REQUEST_TIMEOUT));
        tcp.set_nodelay(true);
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let http = HyperClient::builder(TokioExecutor::new()).build(connector);
        Ok(EtcdClient {
            http,
            endpoints: settings
                .endpoints
                .iter()
                .map(|endpoint| endpoint.trim_end_matches('/').to_owned())
                .collect(),
            preferred: AtomicUsize::new(0),
            credentials: settings.credentials.clone(),
            token: Mutex::new(None),
        })
    }

    /// Grants a lease of `ttl` (whole seconds, at least one) and returns its id.
    pub async fn grant_lease(&self, ttl: Duration) -> Result<i64, EtcdError> {
        #[derive(Deserialize)]
        struct Granted {
            #[serde(rename = "ID", default)]
            id: Int,
        }
        let seconds = ttl.as_secs().max(1);
        let granted: Granted = self
            .call("/v3/lease/grant", json!({ "TTL": seconds.to_string() }))
            .await?;
        Ok(granted.id.0)
    }

    /// Renews `lease`; returns its new TTL, or `None` when the lease no longer exists.
    pub async fn keep_alive(&self, lease: i64) -> Result<Option<Duration>, EtcdError> {
        #[derive(Deserialize)]
        struct Renewed {
            #[serde(default)]
            result: RenewedResult,
        }
        #[derive(Deserialize, Default)]
        struct RenewedResult {
            #[serde(rename = "TTL", default)]
            ttl: Int,
        }
        let renewed: Renewed = self
            .call("/v3/lease/keepalive", json!({ "ID": lease.to_string() }))
            .await?;
        let ttl = renewed.result.ttl.0;
        Ok((ttl > 0).then(|| Duration::from_secs(ttl.unsigned_abs())))
    }

    /// Puts `value` at `key`, attached to `lease` when not 0.
    pub async fn put(&self, key: &str, value: &str, lease: i64) -> Result<(), EtcdError> {
        let _: Value = self.call("/v3/kv/put", put_body(key, value, lease)).await?;
        Ok(())
    }

    /// The key `key`, when it exists.
    pub async fn get(&self, key: &str) -> Result<Option<KeyValue>, EtcdError> {
        let range: RangeAnswer = self
            .call("/v3/kv/range", json!({ "key": encode(key) }))
            .await?;
        Ok(range.key_values().into_iter().find(|kv| kv.key == key))
    }

    /// Every key starting with `prefix`.
    pub async fn list(&self, prefix: &str) -> Result<Vec<KeyValue>, EtcdError> {
        let body = json!({ "key": encode(prefix), "range_end": encode_bytes(&prefix_end(prefix)) });
        let range: RangeAnswer = self.call("/v3/kv/range", body).await?;
        Ok(range.key_values())
    }

    /// At most `limit` keys starting with `prefix` and sorting after `after` (from the first
    /// when `None`), in key order, and whether more follow: a range read in pages, so that
    /// no answer grows past [`ETCD_BODY_MAX_BYTES`].
    pub async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<KeyValue>, bool), EtcdError> {
        let start = match after {
            Some(key) => format!("{key}\0"),
            None => prefix.to_owned(),
        };
        let body = json!({
            "key": encode(&start),
            "range_end": encode_bytes(&prefix_end(prefix)),
            "limit": limit.to_string(),
        });
        let range: RangeAnswer = self.call("/v3/kv/range", body).await?;
        let more = range.more;
        Ok((range.key_values(), more))
    }

    /// Deletes `key` (nothing happens when it does not exist).
    pub async fn delete(&self, key: &str) -> Result<(), EtcdError> {
        let _: Value = self
            .call("/v3/kv/deleterange", json!({ "key": encode(key) }))
            .await?;
        Ok(())
    }

    /// Runs `writes` if every comparison holds; returns whether they ran.
    pub async fn transaction(
        &self,
        compares: &[Compare],
        writes: &[Write],
    ) -> Result<bool, EtcdError> {
        Ok(self.commit(compares, writes).await?.is_some())
    }

    /// Runs `writes` if every comparison holds; returns the revision they were written at
    /// (every key the transaction put has it as its `mod_revision`), or `None` when a
    /// comparison failed and nothing was written.
    pub async fn commit(
        &self,
        compares: &[Compare],
        writes: &[Write],
    ) -> Result<Option<i64>, EtcdError> {
        #[derive(Deserialize)]
        struct TxnAnswer {
            #[serde(default)]
            succeeded: bool,
            #[serde(default)]
            header: Header,
        }
        #[derive(Deserialize, Default)]
        struct Header {
            #[serde(default)]
            revision: Int,
        }
        let body = json!({
            "compare": compares.iter().map(compare_body).collect::<Vec<_>>(),
            "success": writes.iter().map(write_body).collect::<Vec<_>>(),
        });
        let answer: TxnAnswer = self.call("/v3/kv/txn", body).await?;
        Ok(answer.succeeded.then_some(answer.header.revision.0))
    }

    /// The endpoint tried first: the last one that answered.
    pub fn preferred_endpoint(&self) -> &str {
        let index = self.preferred.load(Ordering::Relaxed);
        self.endpoints.get(index).map_or("", String::as_str)
    }

    /// POSTs `body` to `path` on the preferred endpoint, then on each other one while they
    /// fail as endpoints (no answer, or HTTP 5xx). When every one failed but a member knows a
    /// leader now, the cluster was electing one (a member died: every request in flight is
    /// answered "leader changed"), and the request goes round the endpoints once more. When
    /// they fail again, says whether the cluster lost its quorum ([`EtcdError::NoQuorum`]).
    async fn call<T: DeserializeOwned>(&self, path: &str, body: Value) -> Result<T, EtcdError> {
        let error = match self.call_each_endpoint(path, &body).await {
            Ok(answer) => return Ok(answer),
            Err(error) if !error.is_endpoint_failure() => return Err(error),
            Err(error) => error,
        };
        let error = match self.explain_outage(error).await {
            Outage::LeaderKnown(_) => match self.call_each_endpoint(path, &body).await {
                Ok(answer) => return Ok(answer),
                Err(error) if !error.is_endpoint_failure() => return Err(error),
                Err(error) => self.explain_outage(error).await,
            },
            explained => explained,
        };
        Err(error.into_error())
    }

    /// `body` to `path` on each endpoint from the preferred one, until one answers or fails
    /// other than as an endpoint; the last failure otherwise.
    async fn call_each_endpoint<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<T, EtcdError> {
        let first = self.preferred.load(Ordering::Relaxed);
        let mut last_error = None;
        for offset in 0..self.endpoints.len() {
            let index = (first + offset) % self.endpoints.len();
            let endpoint = &self.endpoints[index];
            match self.call_endpoint(endpoint, path, body).await {
                Ok(answer) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok(answer);
                }
                Err(error) if error.is_endpoint_failure() => last_error = Some(error),
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| EtcdError::Setup("no endpoints".into())))
    }

    /// Every endpoint failed with `error`. Asks each member for its status (served by the
    /// member alone, without a quorum): when one knows a leader, the cluster has one now;
    /// when some answer and none knows a leader, the cluster lost its quorum; otherwise
    /// `error` stands.
    async fn explain_outage(&self, error: EtcdError) -> Outage {
        /// etcd always sends `header`: an answer without it is not from an etcd member.
        #[derive(Deserialize)]
        struct MemberStatus {
            #[serde(rename = "header")]
            _header: Value,
            #[serde(default)]
            leader: Int,
        }
        let token = self.cached_token();
        let mut answering = Vec::new();
        let mut silent = Vec::new();
        for endpoint in &self.endpoints {
            let status: Result<MemberStatus, _> = self
                .post(endpoint, STATUS_PATH, &json!({}), token.as_deref())
                .await;
            match status {
                Ok(status) if status.leader.0 != 0 => return Outage::LeaderKnown(error),
                Ok(_) => answering.push(endpoint.clone()),
                Err(_) => silent.push(endpoint.clone()),
            }
        }
        if answering.is_empty() {
            return Outage::Unexplained(error);
        }
        Outage::NoQuorum(EtcdError::NoQuorum {
            answering,
            silent,
            cause: error.describe(""),
        })
    }

    /// One endpoint; authenticates first when credentials are set, and once more when etcd
    /// says the token expired.
    async fn call_endpoint<T: DeserializeOwned>(
        &self,
        endpoint: &str,
        path: &str,
        body: &Value,
    ) -> Result<T, EtcdError> {
        let token = self.token(endpoint).await?;
        match self.post(endpoint, path, body, token.as_deref()).await {
            Err(EtcdError::Refused { message, .. })
                if token.is_some() && message.contains("auth") =>
            {
                self.forget_token();
                let token = self.token(endpoint).await?;
                self.post(endpoint, path, body, token.as_deref()).await
            }
            other => other,
        }
    }

    async fn post<T: DeserializeOwned>(
        &self,
        endpoint: &str,
        path: &str,
        body: &Value,
        token: Option<&str>,
    ) -> Result<T, EtcdError> {
        let mut request = hyper::Request::post(format!("{endpoint}{path}"))
            .header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(token) = token {
            request = request.header(hyper::header::AUTHORIZATION, token);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|error| EtcdError::Setup(format!("{endpoint}{path}: {error}")))?;
        let (status, text) =
            tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(endpoint, request))
                .await
                .map_err(|_| {
                    EtcdError::unreachable(
                        endpoint,
                        format!("no answer within {REQUEST_TIMEOUT:?}"),
                    )
                })??;
        if !status.is_success() {
            return Err(EtcdError::Refused {
                endpoint: endpoint.to_owned(),
                path: path.to_owned(),
                status: status.as_u16(),
                message: gateway_error_message(&text),
            });
        }
        // Streaming endpoints (keepalive) answer one JSON object per line.
        let first_line = text
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("{}");
        serde_json::from_str(first_line).map_err(|error| EtcdError::Malformed {
            endpoint: endpoint.to_owned(),
            path: path.to_owned(),
            message: format!("{error} in {}", truncate(first_line, 200)),
        })
    }

    /// Sends `request` to `endpoint` and reads the whole answer; the error is
    /// [`EtcdError::Unreachable`].
    async fn exchange(
        &self,
        endpoint: &str,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<(StatusCode, String), EtcdError> {
        let unreachable = |message| EtcdError::unreachable(endpoint, message);
        let response = self
            .http
            .request(request)
            .await
            .map_err(|error| unreachable(describe_error(&error)))?;
        let status = response.status();
        let body = http_body_util::Limited::new(response.into_body(), ETCD_BODY_MAX_BYTES)
            .collect()
            .await
            .map_err(|error| {
                if error.is::<http_body_util::LengthLimitError>() {
                    return unreachable(format!(
                        "the answer is larger than {ETCD_BODY_MAX_BYTES} bytes, the most forewarn \
                         reads; check that the endpoints are etcd client URLs"
                    ));
                }
                unreachable(describe_error(error.as_ref()))
            })?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// The auth token, fetched on first use when credentials are configured.
    async fn token(&self, endpoint: &str) -> Result<Option<String>, EtcdError> {
        let Some(credentials) = &self.credentials else {
            return Ok(None);
        };
        if let Some(token) = self.cached_token() {
            return Ok(Some(token));
        }
        #[derive(Deserialize)]
        struct Authenticated {
            #[serde(default)]
            token: String,
        }
        let body = json!({ "name": credentials.user, "password": credentials.password });
        let answer: Authenticated = self.post(endpoint, AUTH_PATH, &body, None).await?;
        if let Ok(mut cached) = self.token.lock() {
            *cached = Some(answer.token.clone());
        }
        Ok(Some(answer.token))
    }

    fn cached_token(&self) -> Option<String> {
        self.token.lock().ok().and_then(|cached| cached.clone())
    }

    fn forget_token(&self) {
        if let Ok(mut cached) = self.token.lock() {
            *cached = None;
        }
    }
}

mod gateway_wire;
#[cfg(test)]
mod tests;

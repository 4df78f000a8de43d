//! A small client of the OCI distribution API (`/v2/…`): manifests and blobs, pulled and
//! pushed, over hyper with rustls (ring). What it promises:
//!
//! - every body is read under a size limit (the `Content-Length` first, then while reading),
//!   and a blob is handed over only when its size and sha256 match its descriptor;
//! - a redirect is followed only to the same scheme, host and port: a registry cannot send
//!   forewarn to fetch from (or send credentials to) anywhere else;
//! - https:// is verified against the system's CAs and `--ca-file` (which may hold the
//!   registry's own self-signed certificate: [`crate::registry_tls`]); plain http:// only
//!   when asked for (`--plain-http`);
//! - credentials go to the registry (basic), or to the token service its 401 names, over the
//!   same scheme, for a bearer token that then goes to the registry.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use url::Url;

use crate::artifact::{Descriptor, MANIFEST_MEDIA_TYPE, MAX_OCI_MANIFEST_BYTES};
use crate::bounded_body::{Limit, READ_TIMEOUT, check_blob, read_blob, read_capped};
use crate::error::SupplyError;
use crate::reference::Digest;
use crate::registry_credentials::{Credentials, challenge_parameters, refusal_fix};
use crate::registry_tls::{self, describe_client_error};

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;
/// Largest token answer read.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;
/// Largest error answer quoted.
const MAX_ERROR_BYTES: u64 = 16 * 1024;

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Speak plain http:// (a registry on loopback or a lab network), not https://.
    pub plain_http: bool,
    /// A PEM file of CAs trusted besides the system's (a private registry).
    pub ca_file: Option<PathBuf>,
    /// Credentials; found with [`Credentials::find`] when `None`.
    pub credentials: Option<Credentials>,
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client of one registry and repository.
pub struct RegistryClient {
    http: HttpClient,
    base: Url,
    registry: String,
    repository: String,
    credentials: Option<Credentials>,
    /// Where `credentials` came from, as a 401 or 403 names it.
    credentials_origin: Option<String>,
    /// `--ca-file`, named in what a TLS failure is told.
    ca_file: Option<PathBuf>,
    /// The `Authorization` value that worked (basic, or a bearer token).
    authorization: Arc<Mutex<Option<String>>>,
}

/// A manifest as the registry served it.
pub struct ServedManifest {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The `Docker-Content-Digest` the registry sent, if any.
    pub digest_header: Option<String>,
}

impl RegistryClient {
    /// A client of `repository` at `registry` (`host[:port]`).
    pub fn new(
        registry: &str,
        repository: &str,
        options: &RegistryOptions,
    ) -> Result<RegistryClient, SupplyError> {
        let scheme = if options.plain_http { "http" } else { "https" };
        let base = Url::parse(&format!("{scheme}://{registry}/")).map_err(|error| {
            SupplyError::Usage(format!(
                "\"{registry}\" is not a registry host[:port]: {error}"
            ))
        })?;
        let tls = registry_tls::client_config(options.ca_file.as_deref())?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.enforce_http(false);
        let builder = HttpsConnectorBuilder::new().with_tls_config(tls);
        let https = match options.plain_http {
            true => builder
                .https_or_http()
                .enable_http1()
                .wrap_connector(connector),
            false => builder
                .https_only()
                .enable_http1()
                .wrap_connector(connector),
        };
        let (credentials, credentials_origin) = match &options.credentials {
            Some(credentials) => (
                Some(credentials.clone()),
                Some("the caller (RegistryOptions)".to_owned()),
            ),
            None => match Credentials::find_with_origin(registry) {
                Some((credentials, origin)) => (Some(credentials), Some(origin)),
                None => (None, None),
            },
        };
        Ok(RegistryClient {
            http: Client::builder(TokioExecutor::new()).build(https),
            base,
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            credentials,
            credentials_origin,
            ca_file: options.ca_file.clone(),
            authorization: Arc::new(Mutex::new(None)),
        })
    }

    fn url(&self, path: &str) -> Url {
        self.base
            .join(&format!("v2/{}/{path}", self.repository))
            .expect("a repository path joins onto the registry URL")
    }

    /// The manifest at `reference` (a tag or digest); `None` when the registry has none.
    pub async fn manifest(&self, reference: &str) -> Result<Option<ServedManifest>, SupplyError> {
        let what = format!(
            "the manifest {}/{}:{reference}",
            self.registry, self.repository
        );
        let accept = format!("{MANIFEST_MEDIA_TYPE}, application/vnd.oci.image.index.v1+json");
        let response = self
            .get(
                &self.url(&format!("manifests/{reference}")),
                Some(&accept),
                &what,
            )
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = self.expect_success(response, &what).await?;
        let digest_header = response
            .headers()
            .get("docker-content-digest")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let limit = Limit {
            bytes: MAX_OCI_MANIFEST_BYTES,
            fix: "An OCI manifest of a plugin is a few kilobytes; this is not one".into(),
        };
        let bytes = read_capped(response, &limit, &what).await?;
        Ok(Some(ServedManifest {
            bytes,
            digest_header,
        }))
    }

    /// The blob `descriptor` names, checked against its size and digest, under `limit`.
    pub async fn blob(
        &self,
        descriptor: &Descriptor,
        limit: &Limit,
        what: &str,
    ) -> Result<Vec<u8>, SupplyError> {
        let digest = Digest::parse(&descriptor.digest)?;
        limit.check(what, descriptor.size)?;
        let response = self
            .get(&self.url(&format!("blobs/{digest}")), None, what)
            .await?;
        let response = self.expect_success(response, what).await?;
        let bytes = read_blob(response, descriptor, what).await?;
        check_blob(&bytes, descriptor, &digest, what)?;
        Ok(bytes)
    }

    /// Whether the repository has the blob `digest` already.
    pub async fn has_blob(&self, digest: &Digest) -> Result<bool, SupplyError> {
        let what = format!("checking for blob {digest}");
        let response = self
            .send(
                Method::HEAD,
                &self.url(&format!("blobs/{digest}")),
                &[],
                Bytes::new(),
                &what,
            )
            .await?;
        Ok(response.status().is_success())
    }

    /// Uploads `bytes` as a blob (one monolithic upload), unless the registry has it.
    pub async fn push_blob(&self, bytes: &[u8], what: &str) -> Result<(), SupplyError> {
        let digest = Digest::of(bytes);
        if self.has_blob(&digest).await? {
            return Ok(());
        }
        let response = self
            .send(
                Method::POST,
                &self.url("blobs/uploads/"),
                &[],
                Bytes::new(),
                what,
            )
            .await?;
        let response = self.expect_success(response, what).await?;
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| SupplyError::Status {
                what: what.to_owned(),
                status: response.status().as_u16(),
                detail: " without a Location for the upload".into(),
                fix: "The registry does not speak the OCI distribution API".into(),
            })?;
        let mut upload = self.same_origin(&self.base, location, what)?;
        upload
            .query_pairs_mut()
            .append_pair("digest", digest.as_str());
        let headers = [(header::CONTENT_TYPE, "application/octet-stream")];
        let response = self
            .send(
                Method::PUT,
                &upload,
                &headers,
                Bytes::copy_from_slice(bytes),
                what,
            )
            .await?;
        self.expect_success(response, what).await?;
        Ok(())
    }

    /// Puts `bytes` as the manifest at `reference` (a tag).
    pub async fn push_manifest(&self, reference: &str, bytes: &[u8]) -> Result<(), SupplyError> {
        let what = format!(
            "pushing the manifest {}/{}:{reference}",
            self.registry, self.repository
        );
        let headers = [(header::CONTENT_TYPE, MANIFEST_MEDIA_TYPE)];
        let response = self
            .send(
                Method::PUT,
                &self.url(&format!("manifests/{reference}")),
                &headers,
                Bytes::copy_from_slice(bytes),
                &what,
            )
            .await?;
        self.expect_success(response, &what).await?;
        Ok(())
    }

    /// GET, following redirects within the registry only.
    async fn get(
        &self,
        url: &Url,
        accept: Option<&str>,
        what: &str,
    ) -> Result<Response<Incoming>, SupplyError> {
        let mut url = url.clone();
        let headers: Vec<(header::HeaderName, &str)> = accept
            .map(|accept| vec![(header::ACCEPT, accept)])
            .unwrap_or_default();
        for _ in 0..=MAX_REDIRECTS {
            let response = self
                .send(Method::GET, &url, &headers, Bytes::new(), what)
                .await?;
            if !response.status().is_redirection() {
                return Ok(response);
            }
            let location = response
                .headers()
                .get(header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default();
            url = self.same_origin(&url, location, what)?;
        }
        Err(SupplyError::Status {
            what: what.to_owned(),
            status: 310,
            detail: format!(": more than {MAX_REDIRECTS} redirects"),
            fix: "The registry redirects in a loop; tell its operator".into(),
        })
    }

    /// `location` resolved against `from`, if it stays on the registry's scheme, host and port.
    fn same_origin(&self, from: &Url, location: &str, what: &str) -> Result<Url, SupplyError> {
        let redirect = || SupplyError::Redirect {
            registry: self.registry.clone(),
            what: what.to_owned(),
            location: printable(location),
        };
        let next = from.join(location).map_err(|_| redirect())?;
        let same = next.scheme() == self.base.scheme()
            && next.host_str() == self.base.host_str()
            && next.port_or_known_default() == self.base.port_or_known_default();
        if !same {
            return Err(redirect());
        }
        Ok(next)
    }

    /// Sends one request; on a 401, authenticates as the challenge asks and sends it again.
    async fn send(
        &self,
        method: Method,
        url: &Url,
        headers: &[(header::HeaderName, &str)],
        body: Bytes,
        what: &str,
    ) -> Result<Response<Incoming>, SupplyError> {
        for attempt in 0..2 {
            let mut request = Request::builder()
                .method(method.clone())
                .uri(url.as_str())
                .header(
                    header::USER_AGENT,
                    concat!("forewarn/", env!("CARGO_PKG_VERSION")),
                );
            for (name, value) in headers {
                request = request.header(name, *value);
            }
            let authorization = self
                .authorization
                .lock()
                .ok()
                .and_then(|guard| guard.clone());
            if let Some(authorization) = authorization {
                request = request.header(header::AUTHORIZATION, authorization);
            }
            let request = request
                .body(Full::new(body.clone()))
                .map_err(|error| SupplyError::Usage(format!("{what}: bad request: {error}")))?;
            let response = match tokio::time::timeout(READ_TIMEOUT, self.http.request(request))
                .await
            {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => {
                    let (problem, fix) = describe_client_error(&error, url, self.ca_file.as_ref());
                    return Err(SupplyError::Connection {
                        what: what.to_owned(),
                        problem,
                        fix,
                    });
                }
                Err(_) => {
                    return Err(SupplyError::connection(
                        what,
                        format!(
                            "{} did not answer within {}s",
                            url.origin().ascii_serialization(),
                            READ_TIMEOUT.as_secs()
                        ),
                    ));
                }
            };
            if response.status() != StatusCode::UNAUTHORIZED || attempt == 1 {
                return Ok(response);
            }
            self.authenticate(&response, what).await?;
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// Answers a 401's challenge: basic credentials, or a bearer token from the realm.
    async fn authenticate(
        &self,
        response: &Response<Incoming>,
        what: &str,
    ) -> Result<(), SupplyError> {
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let authorization = if challenge.to_ascii_lowercase().starts_with("bearer") {
            format!("Bearer {}", self.bearer_token(&challenge, what).await?)
        } else {
            self.credentials()?.basic()
        };
        if let Ok(mut guard) = self.authorization.lock() {
            *guard = Some(authorization);
        }
        Ok(())
    }

    fn credentials(&self) -> Result<&Credentials, SupplyError> {
        self.credentials
            .as_ref()
            .ok_or_else(|| SupplyError::Status {
                what: format!("logging in to {}", self.registry),
                status: 401,
                detail: String::new(),
                fix: refusal_fix(false, &self.registry, None),
            })
    }

    /// A token from the challenge's realm, with the credentials if there are any.
    async fn bearer_token(&self, challenge: &str, what: &str) -> Result<String, SupplyError> {
        let parameters = challenge_parameters(challenge);
        let realm = parameters
            .iter()
            .find(|(key, _)| key == "realm")
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        let mut url = Url::parse(&realm).map_err(|_| SupplyError::Status {
            what: what.to_owned(),
            status: 401,
            detail: format!(
                " with a token realm that is not a URL ({})",
                printable(&realm)
            ),
            fix: "The registry's authentication is misconfigured; tell its operator".into(),
        })?;
        if url.scheme() != self.base.scheme() {
            return Err(SupplyError::Usage(format!(
                "the registry {} asks for a token from {}, not over {}; refusing to send \
                 credentials there",
                self.registry,
                printable(&realm),
                self.base.scheme()
            )));
        }
        for (key, value) in &parameters {
            if key == "service" || key == "scope" {
                url.query_pairs_mut().append_pair(key, value);
            }
        }
        let mut request = Request::get(url.as_str());
        if let Some(credentials) = &self.credentials {
            request = request.header(header::AUTHORIZATION, credentials.basic());
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|error| SupplyError::Usage(format!("bad token request: {error}")))?;
        let token_what = format!(
            "getting a token for {} from {}",
            self.registry,
            printable(&realm)
        );
        let response = tokio::time::timeout(READ_TIMEOUT, self.http.request(request))
            .await
            .map_err(|_| SupplyError::connection(&token_what, "no answer".into()))?
            .map_err(|error| {
                let (problem, fix) = describe_client_error(&error, &url, self.ca_file.as_ref());
                SupplyError::Connection {
                    what: token_what.clone(),
                    problem,
                    fix,
                }
            })?;
        let response = self.expect_success(response, &token_what).await?;
        let limit = Limit {
            bytes: MAX_TOKEN_BYTES,
            fix: "A token answer is small; this is not one".into(),
        };
        let body = read_capped(response, &limit, &token_what).await?;
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        json["token"]
            .as_str()
            .or_else(|| json["access_token"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| SupplyError::Status {
                what: token_what,
                status: 200,
                detail: " without a token".into(),
                fix: "The registry's token service is misconfigured; tell its operator".into(),
            })
    }

    /// The response, or an error naming the status and the registry's own message.
    async fn expect_success(
        &self,
        response: Response<Incoming>,
        what: &str,
    ) -> Result<Response<Incoming>, SupplyError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let limit = Limit {
            bytes: MAX_ERROR_BYTES,
            fix: String::new(),
        };
        let body = read_capped(response, &limit, what)
            .await
            .unwrap_or_default();
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|json| json["errors"][0]["message"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let detail = match message.is_empty() {
            true => String::new(),
            false => format!(": {}", printable(&message)),
        };
        let origin = self.credentials_origin.as_deref();
        let fix = match status {
            StatusCode::UNAUTHORIZED => refusal_fix(false, &self.registry, origin),
            StatusCode::FORBIDDEN => refusal_fix(true, &self.registry, origin),
            StatusCode::NOT_FOUND => "Check the repository and the tag".into(),
            // docker-registry's answer to http:// on its https:// port.
            StatusCode::BAD_REQUEST if self.base.scheme() == "http" => {
                "If the registry speaks https://, leave out --plain-http; else tell its \
                 operator"
                    .into()
            }
            _ => "Try again later, or tell the registry's operator".into(),
        };
        Err(SupplyError::Status {
            what: what.to_owned(),
            status: status.as_u16(),
            detail,
            fix,
        })
    }
}

/// `text` escaped and cut as every string from outside is ([`forewarn_manifest::shown`]), so what
/// a registry sends cannot forge terminal output.
fn printable(text: &str) -> String {
    forewarn_manifest::shown::escaped(text, 300)
}

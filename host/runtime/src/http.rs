//! Outbound HTTP for plugins (`http-send`): the allow-list check on the URL's host and port,
//! then one request without proxy or redirects, cut at the call's deadline, body capped.

use std::sync::Arc;
use std::time::Instant;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::bindings::{HostError, HttpRequest, HttpResponse};

/// Largest response body handed to a plugin; the rest is not read.
pub const RESPONSE_BODY_MAX_BYTES: usize = 1024 * 1024;

/// The HTTP client shared by every plugin: never through a proxy, never follows redirects.
/// Cheap to clone.
#[derive(Clone)]
pub struct HttpClient {
    client: Arc<Result<reqwest::Client, String>>,
}

impl Default for HttpClient {
    fn default() -> Self {
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| error_chain(&error));
        HttpClient {
            client: Arc::new(client),
        }
    }
}

/// Parses `url` and checks that its `host:port` is on `allowed` (host compared without
/// regard to case, port exact; the port defaults to 80 for http). Err names the fix.
pub fn check_allowed(plugin: &str, url: &str, allowed: &[String]) -> Result<Url, HostError> {
    let parsed = Url::parse(url)
        .map_err(|error| HostError::Invalid(format!("`{url}` is not an absolute URL: {error}")))?;
    match parsed.scheme() {
        "http" => {}
        "https" => {
            return Err(HostError::Invalid(format!(
                "`{url}`: https is not supported by this build of forewarn; use http:// \
                 (plugins talk to local services; put a local proxy in front of remote ones)"
            )));
        }
        other => {
            return Err(HostError::Invalid(format!(
                "`{url}`: scheme `{other}` is not supported; use http://"
            )));
        }
    }
    let authority = authority_of(&parsed)
        .ok_or_else(|| HostError::Invalid(format!("`{url}` names no host")))?;
    if allowed
        .iter()
        .any(|entry| authority_matches(entry, &authority))
    {
        return Ok(parsed);
    }
    Err(HostError::NotGranted(format!(
        "plugin `{plugin}` may not send HTTP requests to {authority}: add \"{authority}\" to \
         [capabilities] http in {plugin}.toml"
    )))
}

/// `host:port` of an http(s) URL, with the scheme's default port filled in.
fn authority_of(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{}:{port}", host.to_ascii_lowercase()))
}

/// Whether an allow-list entry `host:port` names `authority` (already lower-case).
fn authority_matches(entry: &str, authority: &str) -> bool {
    entry.trim().eq_ignore_ascii_case(authority)
}

/// Sends `request` to the already checked `url`; a request still running at `deadline`
/// fails with `timed-out`.
pub async fn send(
    client: &HttpClient,
    request: HttpRequest,
    url: Url,
    deadline: Instant,
) -> Result<HttpResponse, HostError> {
    let client = match client.client.as_ref() {
        Ok(client) => client,
        Err(error) => {
            return Err(HostError::Failed(format!(
                "the daemon's HTTP client could not start: {error}"
            )));
        }
    };
    let method = reqwest::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| HostError::Invalid(format!("`{}` is not an HTTP method", request.method)))?;
    let headers = header_map(&request.headers)?;
    let pending = client
        .request(method, url)
        .headers(headers)
        .body(request.body)
        .send();
    let exchange = async {
        let mut response = pending.await.map_err(request_error)?;
        let status = response.status().as_u16();
        let headers = response_headers(response.headers());
        let mut body = Vec::new();
        while body.len() < RESPONSE_BODY_MAX_BYTES {
            match response.chunk().await.map_err(request_error)? {
                Some(chunk) => body.extend_from_slice(&chunk),
                None => break,
            }
        }
        body.truncate(RESPONSE_BODY_MAX_BYTES);
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    };
    match tokio::time::timeout_at(deadline.into(), exchange).await {
        Ok(result) => result,
        Err(_elapsed) => Err(HostError::TimedOut),
    }
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, HostError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| HostError::Invalid(format!("`{name}` is not a valid header name")))?;
        let header_value = HeaderValue::from_str(value).map_err(|_| {
            HostError::Invalid(format!("the value of header `{name}` is not valid"))
        })?;
        map.append(header_name, header_value);
    }
    Ok(map)
}

fn response_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn request_error(error: reqwest::Error) -> HostError {
    if error.is_timeout() {
        return HostError::TimedOut;
    }
    HostError::Failed(error_chain(&error))
}

/// The error and its sources on one line ("error sending request: connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|entry| (*entry).to_owned()).collect()
    }

    #[test]
    fn allow_list_matches_host_and_port_exactly() {
        let list = allowed(&["127.0.0.1:8080", "Backend.Local:80"]);
        let cases = [
            ("http://127.0.0.1:8080/checkpoint", true),
            ("http://127.0.0.1:8081/checkpoint", false),
            ("http://127.0.0.1/", false),
            ("http://backend.local/x", true),
            ("http://BACKEND.local:80/x", true),
            ("http://backend.local:8080/x", false),
            ("http://evil.example:8080/", false),
            ("http://127.0.0.1:8080@evil.example:8080/", false),
        ];
        for (url, expected) in cases {
            let result = check_allowed("p", url, &list);
            assert_eq!(result.is_ok(), expected, "{url}: {result:?}");
        }
    }

    #[test]
    fn refusal_names_the_manifest_setting() {
        let error = check_allowed("checkpoint", "http://10.0.0.9:9000/x", &[]).unwrap_err();
        let HostError::NotGranted(text) = error else {
            panic!("expected not-granted, got {error:?}");
        };
        assert!(text.contains("\"10.0.0.9:9000\""), "{text}");
        assert!(
            text.contains("[capabilities] http in checkpoint.toml"),
            "{text}"
        );
    }

    #[test]
    fn bad_urls_are_invalid() {
        let list = allowed(&["127.0.0.1:80"]);
        for url in [
            "not a url",
            "/relative",
            "ftp://127.0.0.1/",
            "https://127.0.0.1/",
        ] {
            assert!(
                matches!(check_allowed("p", url, &list), Err(HostError::Invalid(_))),
                "{url}"
            );
        }
    }

    #[tokio::test]
    async fn a_request_past_the_deadline_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        // Accepts and never answers.
        let _server = tokio::spawn(async move {
            let (_socket, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        let url =
            check_allowed("p", &format!("http://{address}/"), &[address.to_string()]).unwrap();
        let request = get_request(&url);
        let deadline = Instant::now() + std::time::Duration::from_millis(200);
        let result = send(&HttpClient::default(), request, url, deadline).await;
        assert_eq!(result, Err(HostError::TimedOut));
    }

    #[tokio::test]
    async fn connection_refused_is_failed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let url =
            check_allowed("p", &format!("http://{address}/"), &[address.to_string()]).unwrap();
        let request = get_request(&url);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let result = send(&HttpClient::default(), request, url, deadline).await;
        assert!(matches!(result, Err(HostError::Failed(_))), "{result:?}");
    }

    /// A bodiless GET of `url`, as a plugin would send it.
    fn get_request(url: &impl std::fmt::Display) -> HttpRequest {
        HttpRequest {
            method: "GET".into(),
            url: url.to_string(),
            headers: vec![],
            body: vec![],
        }
    }
}

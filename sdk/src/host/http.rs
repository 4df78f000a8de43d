//! Outbound HTTP through the daemon, to hosts on the plugin's allow-list
//! (`[capabilities] http = ["host:port"]`): `send` for any request, `get` and `post` shortcuts.

use crate::host::imports as raw;
use crate::{HostError, HttpRequest, HttpResponse};

/// Sends `request` through the daemon and waits for the whole answer. Any status, 4xx and 5xx
/// included, is an `Ok` response; a host not on the allow-list is
/// [`HostError::NotGranted`], a refused connection [`HostError::Failed`], and an answer
/// still missing at the plugin's deadline [`HostError::TimedOut`].
pub fn send(request: &HttpRequest) -> Result<HttpResponse, HostError> {
    raw::http_send(request)
}

/// `GET url` with no headers.
pub fn get(url: &str) -> Result<HttpResponse, HostError> {
    send(&HttpRequest::new("GET", url))
}

/// `POST url` with `body`, sent with the header `content-type: <content_type>`.
pub fn post(
    url: &str,
    content_type: &str,
    body: impl Into<Vec<u8>>,
) -> Result<HttpResponse, HostError> {
    let request = HttpRequest::new("POST", url)
        .header("content-type", content_type)
        .body(body);
    send(&request)
}

impl HttpRequest {
    /// A request with no headers and an empty body.
    pub fn new(method: &str, url: &str) -> Self {
        HttpRequest {
            method: method.to_owned(),
            url: url.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Appends the header `name: value`; headers are sent in the order added, a repeated
    /// name as many times as it was added.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Replaces the body with `body` (bytes or text, sent as they are).
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
}

impl HttpResponse {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The body as text, with invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_builder_collects_headers_and_body() {
        let request = HttpRequest::new("PUT", "http://127.0.0.1:8080/drain")
            .header("content-type", "application/json")
            .body("{}");
        assert_eq!(request.method, "PUT");
        assert_eq!(
            request.headers,
            vec![("content-type".to_owned(), "application/json".to_owned())]
        );
        assert_eq!(request.body, b"{}");
    }

    #[test]
    fn response_helpers() {
        let response = HttpResponse {
            status: 204,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"ok \xff".to_vec(),
        };
        assert!(response.is_success());
        assert_eq!(response.header("content-type"), Some("text/plain"));
        assert_eq!(response.header("etag"), None);
        assert_eq!(response.text(), "ok \u{fffd}");
        assert!(
            !HttpResponse {
                status: 503,
                ..response
            }
            .is_success()
        );
    }
}

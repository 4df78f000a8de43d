//! A small HTTPS client for tests that trusts only the test CA (`Pki`'s `ca.pem`): hyper
//! with rustls and ring, as forewarn-etcd uses, so reqwest's TLS features stay off.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::pki::Pki;

/// What came back: the status and the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body's bytes.
    pub body: Bytes,
}

impl Answer {
    /// The body as text (lossy), for assertions and failure messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// An HTTPS-only client verifying servers against the test CA.
#[derive(Clone)]
pub struct HttpsClient {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl HttpsClient {
    /// A client trusting `ca.pem` of `pki` and nothing else.
    pub fn trusting(pki: &Pki) -> HttpsClient {
        let mut roots = RootCertStore::empty();
        for certificate in CertificateDer::pem_file_iter(pki.file("ca.pem")).expect("read ca.pem") {
            roots
                .add(certificate.expect("a PEM certificate in ca.pem"))
                .expect("ca.pem is a usable CA certificate");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("rustls protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        HttpsClient {
            http: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// Sends one request with these headers and body; panics on a transport error (a test
    /// failure: the server is ours and on loopback).
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(body.into()))
            .unwrap_or_else(|error| panic!("bad request to {url}: {error}"));
        let response = self
            .http
            .request(request)
            .await
            .unwrap_or_else(|error| panic!("HTTPS request to {url} failed: {error:?}"));
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|error| panic!("reading the answer from {url} failed: {error}"))
            .to_bytes();
        Answer { status, body }
    }
}

//! `http-send` over https:// against a local TLS server with the test PKI: trust through
//! `http-ca-file`, name checks, no redirects, the response limit and the deadline. The PKI
//! is committed (`fixtures/`, made by `fixtures/make.sh`), so these run under Wine too.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use forewarn_test_support::https_server::AnsweringServer;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use url::Url;

use super::client::tests::{TableResolver, get_request, silent_server};
use super::client::{Caller, HttpClient, send};
use crate::wit::latest::{HostError, HttpRequest, HttpResponse};
use forewarn_manifest::Capabilities;
use forewarn_manifest::capabilities::http_ca_file::ca_certificates;

const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";

/// The test CA (`fixtures/README.md`).
pub(super) const TEST_CA: &[u8] = include_bytes!("fixtures/ca.pem");

/// A certificate the test CA signed, with its key.
struct Issued {
    certificate: &'static [u8],
    key: &'static [u8],
}

/// For 127.0.0.1 and localhost.
const SERVER: Issued = Issued {
    certificate: include_bytes!("fixtures/server.pem"),
    key: include_bytes!("fixtures/server.key"),
};

/// For other.example only.
const OTHER: Issued = Issued {
    certificate: include_bytes!("fixtures/other.pem"),
    key: include_bytes!("fixtures/other.key"),
};

/// A TLS acceptor presenting `issued`.
fn tls_acceptor(issued: &Issued) -> TlsAcceptor {
    let chain = CertificateDer::pem_slice_iter(issued.certificate)
        .collect::<Result<Vec<_>, _>>()
        .expect("the fixture's certificate");
    let key = PrivateKeyDer::from_pem_slice(issued.key).expect("the fixture's key");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("the fixture's certificate and key");
    TlsAcceptor::from(std::sync::Arc::new(config))
}

/// Capabilities trusting the test CA (as `http-ca-file = "ca.pem"` would).
fn trusting() -> Capabilities {
    Capabilities {
        http_roots: ca_certificates(TEST_CA).unwrap(),
        ..Capabilities::default()
    }
}

/// A client resolving `localhost` to 127.0.0.1 only.
fn client() -> HttpClient {
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    HttpClient::default().with_resolver(TableResolver::new(&[("localhost", loopback)], None))
}

/// Sends `request` for plugin `p` with `grants`, the URL counted as granted.
async fn send_as_p(grants: &Capabilities, request: HttpRequest) -> Result<HttpResponse, HostError> {
    let url = Url::parse(&request.url).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let caller = Caller {
        plugin: "p",
        grants,
    };
    send(&client(), caller, request, url, deadline).await
}

fn failed_text(result: Result<HttpResponse, HostError>) -> String {
    match result {
        Err(HostError::Failed(text)) => text,
        other => panic!("expected failed, got {other:?}"),
    }
}

#[tokio::test]
async fn https_with_the_granted_ca_succeeds_and_the_server_sees_the_exact_request() {
    let mut server = AnsweringServer::start(Some(tls_acceptor(&SERVER)), OK.into()).await;
    let port = server.address.port();
    let request = HttpRequest {
        method: "POST".into(),
        url: format!("https://localhost:{port}/drain?node=vm-1"),
        headers: vec![
            ("X-Plugin".into(), "kept".into()),
            ("Host".into(), "169.254.169.254".into()),
        ],
        body: b"hello".to_vec(),
    };
    let response = send_as_p(&trusting(), request).await.unwrap();
    assert_eq!(
        (response.status, response.body.as_slice()),
        (200, &b"ok"[..])
    );
    let expected = format!(
        "POST /drain?node=vm-1 HTTP/1.1\r\nx-plugin: kept\r\nhost: localhost:{port}\r\n\
         accept: */*\r\ncontent-length: 5\r\n\r\nhello"
    );
    assert_eq!(server.next_request().await, expected);
}

#[tokio::test]
async fn an_ip_address_url_is_verified_against_the_ip_in_the_certificate() {
    let mut server = AnsweringServer::start(Some(tls_acceptor(&SERVER)), OK.into()).await;
    let url = format!("https://{}/", server.address);
    let response = send_as_p(&trusting(), get_request(&url)).await.unwrap();
    assert_eq!(response.status, 200);
    assert!(
        server
            .next_request()
            .await
            .starts_with("GET / HTTP/1.1\r\n")
    );
}

#[tokio::test]
async fn without_the_ca_the_certificate_is_not_trusted_and_the_fix_is_named() {
    let server = AnsweringServer::start(Some(tls_acceptor(&SERVER)), OK.into()).await;
    let url = format!("https://localhost:{}/", server.address.port());
    let text = failed_text(send_as_p(&Capabilities::default(), get_request(&url)).await);
    assert!(text.contains("add its CA with `http-ca-file"), "{text}");
    assert!(text.contains("[capabilities] of p.toml"), "{text}");
    assert!(text.contains("localhost"), "{text}");
}

#[tokio::test]
async fn a_certificate_for_another_name_fails_naming_the_host() {
    let server = AnsweringServer::start(Some(tls_acceptor(&OTHER)), OK.into()).await;
    let url = format!("https://localhost:{}/", server.address.port());
    let text = failed_text(send_as_p(&trusting(), get_request(&url)).await);
    assert!(
        text.contains("the TLS certificate for localhost does not name localhost"),
        "{text}"
    );
}

#[tokio::test]
async fn a_redirect_is_returned_to_the_plugin_not_followed() {
    let answer = b"HTTP/1.1 302 Found\r\nlocation: /elsewhere\r\ncontent-length: 0\r\n\r\n";
    let mut server = AnsweringServer::start(Some(tls_acceptor(&SERVER)), answer.to_vec()).await;
    let url = format!("https://localhost:{}/start", server.address.port());
    let response = send_as_p(&trusting(), get_request(&url)).await.unwrap();
    assert_eq!(response.status, 302);
    let location = ("location".to_owned(), "/elsewhere".to_owned());
    assert!(response.headers.contains(&location), "{response:?}");
    assert!(server.next_request().await.starts_with("GET /start "));
    assert!(!server.has_more_requests(), "the redirect was followed");
}

#[tokio::test]
async fn a_response_longer_than_the_limit_is_cut_at_the_limit() {
    let mut answer = b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n".to_vec();
    answer.extend_from_slice(&[b'x'; 5000]);
    let server = AnsweringServer::start(Some(tls_acceptor(&SERVER)), answer).await;
    let url = format!("https://localhost:{}/checkpoint", server.address.port());
    let mut grants = trusting();
    grants.http_response_limit = Some(bytesize::ByteSize::b(1000));
    let response = send_as_p(&grants, get_request(&url)).await.unwrap();
    assert_eq!(response.body, vec![b'x'; 1000]);
    grants.http_response_limit = Some(bytesize::ByteSize::b(5000));
    let response = send_as_p(&grants, get_request(&url)).await.unwrap();
    assert_eq!(response.body.len(), 5000);
}

#[tokio::test]
async fn the_deadline_bounds_a_tls_handshake_with_a_server_that_never_answers() {
    // Accepts and never answers the ClientHello.
    let (address, _server) = silent_server().await;
    let url = Url::parse(&format!("https://{address}/")).unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_millis(300);
    let grants = Capabilities::default();
    let caller = Caller {
        plugin: "p",
        grants: &grants,
    };
    let result = send(&client(), caller, get_request(&url), url, deadline).await;
    assert_eq!(result, Err(HostError::TimedOut));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_ca_file_needs_at_least_one_usable_certificate() {
    let empty = ca_certificates(b"no pem here\n").unwrap_err().to_string();
    assert!(empty.contains("holds no PEM certificate"), "{empty}");
    let broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let error = ca_certificates(broken).unwrap_err().to_string();
    assert!(error.contains("certificate number 1"), "{error}");
}

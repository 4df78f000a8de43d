//! The simulator's managed identity tokens against Azurite over HTTPS with OAuth: a token
//! for https://storage.azure.com/ creates a container and stores and reads back a blob.

use forewarn_simulator::{Scenario, SimulatorConfig, SimulatorHandle};
use forewarn_test_support::azurite::{Azurite, identity_token};
use forewarn_test_support::https::{Answer, HttpsClient};
use forewarn_test_support::pki::Pki;
use hyper::{Method, StatusCode};

/// The Blob service version the requests name (Azurite accepts any with
/// --skipApiVersionCheck; this one is what current Azure SDKs send).
const STORAGE_VERSION: &str = "2021-08-06";

/// The simulator on a Spot VM with a managed identity; `extra` adds scenario TOML.
async fn simulator(extra: &str) -> SimulatorHandle {
    let text = format!("name = \"azurite\"\npriority = \"Spot\"\n{extra}");
    let config = SimulatorConfig {
        listen: "127.0.0.1:0".parse().expect("a socket address"),
        scenario: Scenario::from_toml(&text, "azurite.toml").expect("a valid scenario"),
        speed: 1.0,
    };
    forewarn_simulator::spawn(config)
        .await
        .expect("the simulator starts")
}

/// [`identity_token`] off the runtime's thread: the simulator runs on this runtime.
async fn fetch_token(imds: &str, resource: &str) -> String {
    let (imds, resource) = (imds.to_owned(), resource.to_owned());
    tokio::task::spawn_blocking(move || identity_token(&imds, &resource))
        .await
        .expect("the token fetch ran")
}

/// A Blob service request with `x-ms-version` and `x-ms-date`, and a bearer token if any.
async fn blob_request(
    client: &HttpsClient,
    method: Method,
    url: &str,
    token: Option<&str>,
    extra: &[(&str, &str)],
    body: &'static [u8],
) -> Answer {
    let date = chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    let authorization = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("x-ms-version", STORAGE_VERSION), ("x-ms-date", &date)];
    if let Some(authorization) = &authorization {
        headers.push(("authorization", authorization));
    }
    headers.extend_from_slice(extra);
    client.send(method, url, &headers, body).await
}

#[tokio::test]
async fn a_simulated_managed_identity_token_stores_and_reads_a_blob_in_azurite() {
    let pki = Pki::generate();
    let azurite = Azurite::start(&pki);
    let sim = simulator("").await;
    let token = fetch_token(&sim.base_url(), "https://storage.azure.com/").await;
    let client = HttpsClient::trusting(&pki);
    let container = format!("{}/checkpoints", azurite.blob_endpoint());
    let blob = format!("{container}/vm-a.bin");

    let created = blob_request(
        &client,
        Method::PUT,
        &format!("{container}?restype=container"),
        Some(&token),
        &[],
        b"",
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let stored = blob_request(
        &client,
        Method::PUT,
        &blob,
        Some(&token),
        &[("x-ms-blob-type", "BlockBlob")],
        b"checkpoint bytes \x00\xff",
    )
    .await;
    assert_eq!(stored.status, StatusCode::CREATED, "{}", stored.text());
    let read = blob_request(&client, Method::GET, &blob, Some(&token), &[], b"").await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text());
    assert_eq!(&read.body[..], b"checkpoint bytes \x00\xff");
    assert_eq!(sim.snapshot().identity_requests().len(), 1);
    sim.shutdown().await;
    drop(azurite);
}

#[tokio::test]
async fn azurite_refuses_a_blob_request_without_a_token_or_with_a_bad_one() {
    let pki = Pki::generate();
    let azurite = Azurite::start(&pki);
    let sim = simulator("").await;
    let short_lived = simulator("[identity]\nexpires_in = \"1s\"\n").await;
    let client = HttpsClient::trusting(&pki);
    let create = format!("{}/refused?restype=container", azurite.blob_endpoint());
    let wrong_audience = fetch_token(&sim.base_url(), "https://vault.azure.net").await;
    let expired = fetch_token(&short_lived.base_url(), "https://storage.azure.com/").await;
    // Azurite compares `exp` (whole seconds) with its clock in milliseconds.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;

    for (what, token, code) in [
        ("no token", None, "AuthorizationFailure"),
        (
            "a malformed token",
            Some("not-a-jwt"),
            "AuthenticationFailed",
        ),
        (
            "a token for another resource",
            Some(wrong_audience.as_str()),
            "Invalid token audience",
        ),
        (
            "an expired token",
            Some(expired.as_str()),
            "The token is expired",
        ),
    ] {
        let answer = blob_request(&client, Method::PUT, &create, token, &[], b"").await;
        let text = answer.text();
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{what}: {text}");
        assert!(text.contains(code), "{what}: expected {code:?} in {text}");
    }
    sim.shutdown().await;
    short_lived.shutdown().await;
}

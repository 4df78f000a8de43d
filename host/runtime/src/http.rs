//! Outbound HTTP for plugins (`http-send`), once the URL is granted: DNS once, the network
//! rules on every address, and one request to exactly the checked addresses.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::network::{self, Resolver, SystemResolver};
use crate::wit::latest::{HostError, HttpRequest, HttpResponse};

/// Largest response body handed to a plugin; the rest is not read.
pub(crate) const RESPONSE_BODY_MAX_BYTES: usize = 1024 * 1024;

/// Request headers a plugin may not set: `Host` (the real host is always sent), `Metadata`
/// (what IMDS requires), and the hop-by-hop and framing headers the client owns.
pub(crate) const DROPPED_REQUEST_HEADERS: &[&str] = &[
    "host",
    "metadata",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// How plugins reach the network: never through a proxy, never following redirects, DNS
/// resolved once per request and every address checked before connecting. Cheap to clone.
#[derive(Clone)]
pub struct HttpClient {
    resolver: Arc<dyn Resolver>,
    /// Addresses refused besides the always-forbidden ones: the daemon's IMDS endpoint.
    refused: Arc<Vec<SocketAddr>>,
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient {
            resolver: Arc::new(SystemResolver),
            refused: Arc::new(Vec::new()),
        }
    }
}

impl HttpClient {
    /// A client that also refuses `refused` (e.g. the configured IMDS endpoint).
    pub fn refusing(refused: Vec<SocketAddr>) -> Self {
        let refused = refused.into_iter().map(network::canonical).collect();
        HttpClient {
            refused: Arc::new(refused),
            ..HttpClient::default()
        }
    }

    /// The same rules with another DNS resolver (tests map names to any address).
    pub fn with_resolver(self, resolver: Arc<dyn Resolver>) -> Self {
        HttpClient { resolver, ..self }
    }

    /// Why `address` may not be connected to, or None.
    fn refusal(&self, address: SocketAddr) -> Option<String> {
        if let Some(reason) = network::forbidden_ip(address.ip()) {
            return Some(reason.to_owned());
        }
        let address = network::canonical(address);
        if self.refused.contains(&address) {
            return Some("the daemon's IMDS endpoint (`imds.url`)".to_owned());
        }
        None
    }
}

/// Sends `request` to the already checked `url`: resolves its host once, refuses the
/// request if any address is forbidden, then connects to exactly those addresses. A request
/// still running at `deadline` fails with `timed-out`.
pub(crate) async fn send(
    client: &HttpClient,
    request: HttpRequest,
    url: Url,
    deadline: Instant,
) -> Result<HttpResponse, HostError> {
    let method = reqwest::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| HostError::Invalid(format!("`{}` is not an HTTP method", request.method)))?;
    let headers = header_map(&request.headers)?;
    let exchange = async {
        let connector = checked_client(client, &url).await?;
        let pending = connector
            .request(method, url)
            .headers(headers)
            .body(request.body)
            .send();
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

/// A one-off reqwest client that can only reach the checked addresses of `url`'s host.
async fn checked_client(client: &HttpClient, url: &Url) -> Result<reqwest::Client, HostError> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| HostError::Invalid(format!("`{url}` names no port")))?;
    let (name, addresses) = match url.host() {
        Some(url::Host::Ipv4(ip)) => (None, vec![SocketAddr::new(IpAddr::V4(ip), port)]),
        Some(url::Host::Ipv6(ip)) => (None, vec![SocketAddr::new(IpAddr::V6(ip), port)]),
        Some(url::Host::Domain(name)) => (Some(name), resolve(client, name, port).await?),
        None => return Err(HostError::Invalid(format!("`{url}` names no host"))),
    };
    for address in &addresses {
        if let Some(reason) = client.refusal(*address) {
            return Err(HostError::NotGranted(format!(
                "`{url}` leads to {address}, which is {reason}: plugins may never reach it, \
                 whatever their manifest says; point the plugin at another address"
            )));
        }
    }
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none());
    if let Some(name) = name {
        builder = builder.resolve_to_addrs(name, &addresses);
    }
    builder.build().map_err(|error| {
        HostError::Failed(format!(
            "the daemon's HTTP client could not start: {}",
            error_chain(&error)
        ))
    })
}

/// The addresses of `name`, from one DNS lookup; none is an error.
async fn resolve(client: &HttpClient, name: &str, port: u16) -> Result<Vec<SocketAddr>, HostError> {
    let addresses = client.resolver.lookup(name, port).await.map_err(|error| {
        HostError::Failed(format!(
            "cannot resolve `{name}`: {error} (check the name in the plugin's config and the VM's DNS)"
        ))
    })?;
    if addresses.is_empty() {
        return Err(HostError::Failed(format!(
            "`{name}` resolves to no address (check the name in the plugin's config and the VM's DNS)"
        )));
    }
    Ok(addresses)
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, HostError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if DROPPED_REQUEST_HEADERS
            .iter()
            .any(|dropped| name.trim().eq_ignore_ascii_case(dropped))
        {
            continue;
        }
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
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let causes: Vec<String> = anyhow::Chain::new(error).map(ToString::to_string).collect();
    causes.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_past_the_deadline_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        // Accepts and never answers.
        let _server = tokio::spawn(async move {
            let (_socket, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        let url = Url::parse(&format!("http://{address}/")).unwrap();
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
        let url = Url::parse(&format!("http://{address}/")).unwrap();
        let request = get_request(&url);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let result = send(&HttpClient::default(), request, url, deadline).await;
        assert!(matches!(result, Err(HostError::Failed(_))), "{result:?}");
    }

    /// A resolver answering from a fixed table; from the second lookup of a name on it
    /// answers `rebind_to` instead (DNS rebinding), and counts lookups.
    struct TableResolver {
        table: std::collections::HashMap<String, IpAddr>,
        rebind_to: Option<IpAddr>,
        lookups: std::sync::atomic::AtomicUsize,
    }

    impl TableResolver {
        fn new(entries: &[(&str, IpAddr)], rebind_to: Option<IpAddr>) -> Arc<Self> {
            Arc::new(TableResolver {
                table: entries
                    .iter()
                    .map(|(name, ip)| ((*name).to_owned(), *ip))
                    .collect(),
                rebind_to,
                lookups: std::sync::atomic::AtomicUsize::new(0),
            })
        }

        fn lookups(&self) -> usize {
            self.lookups.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl Resolver for TableResolver {
        fn lookup(&self, host: &str, port: u16) -> network::ResolveFuture {
            let previous = self
                .lookups
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let ip = match (previous, self.rebind_to) {
                (1.., Some(rebound)) => Some(rebound),
                _ => self.table.get(host).copied(),
            };
            let answer = ip
                .map(|ip| vec![SocketAddr::new(ip, port)])
                .ok_or_else(|| std::io::Error::other(format!("no such host {host}")));
            Box::pin(async move { answer })
        }
    }

    /// A local server answering one request with 200 "ok"; yields the request head it read.
    async fn recording_server() -> (SocketAddr, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buffer = [0u8; 1024];
            while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                let read = socket.read(&mut buffer).await.unwrap();
                if read == 0 {
                    break;
                }
                head.extend_from_slice(&buffer[..read]);
            }
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
            socket.write_all(answer).await.unwrap();
            String::from_utf8_lossy(&head).to_ascii_lowercase()
        });
        (address, server)
    }

    /// Sends a GET of `url` through `client`, as if the plugin's manifest had granted it.
    async fn send_granted(client: &HttpClient, url: &str) -> Result<HttpResponse, HostError> {
        let granted = Url::parse(url).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        send(client, get_request(&granted), granted, deadline).await
    }

    fn assert_never_reachable(result: &Result<HttpResponse, HostError>, url: &str) {
        match result {
            Err(HostError::NotGranted(text)) => {
                assert!(text.contains("plugins may never reach it"), "{url}: {text}")
            }
            other => panic!("{url} must be refused before connecting, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn platform_addresses_are_refused_in_every_literal_form() {
        let client = HttpClient::default();
        for url in [
            "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01",
            "http://169.254.169.254:80/metadata/identity/oauth2/token",
            "http://2852039166/metadata/scheduledevents",
            "http://0251.0376.0251.0376/",
            "http://0xa9fea9fe/",
            "http://168.63.129.16/machine?comp=goalstate",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://[::ffff:a9fe:a9fe]/",
        ] {
            let result = send_granted(&client, url).await;
            assert_never_reachable(&result, url);
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_a_platform_address_is_refused() {
        let link_local: IpAddr = "169.254.169.254".parse().unwrap();
        let mapped: IpAddr = "::ffff:169.254.169.254".parse().unwrap();
        let resolver =
            TableResolver::new(&[("evil.test", link_local), ("mapped.test", mapped)], None);
        let client = HttpClient::default().with_resolver(resolver);
        for url in [
            "http://evil.test/metadata/scheduledevents",
            "http://mapped.test/",
        ] {
            let result = send_granted(&client, url).await;
            assert_never_reachable(&result, url);
        }
    }

    #[tokio::test]
    async fn the_configured_imds_endpoint_is_refused_by_address_and_by_name() {
        let imds = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        imds.set_nonblocking(true).unwrap();
        let address = imds.local_addr().unwrap();
        let resolver = TableResolver::new(&[("imds.test", address.ip())], None);
        let client = HttpClient::refusing(vec![address]).with_resolver(resolver);
        for url in [
            format!("http://{address}/metadata/scheduledevents"),
            format!(
                "http://imds.test:{}/metadata/scheduledevents",
                address.port()
            ),
        ] {
            let result = send_granted(&client, &url).await;
            assert_never_reachable(&result, &url);
        }
        let accepted = imds.accept();
        assert!(
            matches!(&accepted, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
            "the IMDS endpoint got a connection: {accepted:?}"
        );
    }

    #[tokio::test]
    async fn dns_is_resolved_once_and_the_checked_address_is_the_one_connected() {
        let (address, server) = recording_server().await;
        let rebound: IpAddr = "169.254.169.254".parse().unwrap();
        let resolver = TableResolver::new(&[("backend.test", address.ip())], Some(rebound));
        let client = HttpClient::default().with_resolver(resolver.clone());
        let url = format!("http://backend.test:{}/drain", address.port());
        let response = send_granted(&client, &url).await.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"ok");
        assert_eq!(
            resolver.lookups(),
            1,
            "the name must be resolved exactly once"
        );
        let head = server.await.unwrap();
        assert!(head.starts_with("get /drain http/1.1"), "{head}");
    }

    #[tokio::test]
    async fn plugin_set_host_metadata_and_hop_by_hop_headers_are_dropped() {
        let (address, server) = recording_server().await;
        let resolver = TableResolver::new(&[("backend.test", address.ip())], None);
        let client = HttpClient::default().with_resolver(resolver);
        let url = format!("http://backend.test:{}/drain", address.port());
        let checked = Url::parse(&url).unwrap();
        let mut request = get_request(&checked);
        request.headers = [
            ("Host", "169.254.169.254"),
            ("Metadata", "true"),
            ("Connection", "upgrade"),
            ("Upgrade", "websocket"),
            ("Transfer-Encoding", "chunked"),
            ("X-Plugin", "kept"),
        ]
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let response = send(&client, request, checked, deadline).await.unwrap();
        assert_eq!(response.status, 200);
        let head = server.await.unwrap();
        let real_host = format!("host: backend.test:{}\r\n", address.port());
        assert!(head.contains(&real_host), "{head}");
        assert_eq!(head.matches("host:").count(), 1, "{head}");
        for dropped in [
            "metadata:",
            "169.254.169.254",
            "upgrade",
            "transfer-encoding",
        ] {
            assert!(
                !head.contains(dropped),
                "`{dropped}` reached the server: {head}"
            );
        }
        assert!(head.contains("x-plugin: kept\r\n"), "{head}");
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

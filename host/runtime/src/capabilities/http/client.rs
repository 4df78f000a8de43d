//! Outbound HTTP for plugins (`http-send`), once the URL is granted: DNS once, the network
//! rules on every address, and one request to exactly the checked addresses.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use url::{Position, Url};

use super::grant::grant;
use super::network::{self, Resolver, SystemResolver};
use super::tls::{self, TlsConfigs};
use crate::wit::latest::{HostError, HttpRequest, HttpResponse};
use forewarn_manifest::Capabilities;

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
/// resolved once per request and every address checked before connecting; https:// verified
/// against the system's CAs and the plugin's `http-ca-file`. Cheap to clone.
#[derive(Clone)]
pub struct HttpClient {
    resolver: Arc<dyn Resolver>,
    /// Addresses refused besides the always-forbidden ones: the daemon's IMDS endpoint.
    refused: Arc<Vec<SocketAddr>>,
    /// The TLS configurations, one per set of extra CAs.
    tls: Arc<TlsConfigs>,
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient {
            resolver: Arc::new(SystemResolver),
            refused: Arc::new(Vec::new()),
            tls: Arc::new(TlsConfigs::default()),
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

    /// What `http-send` does for `plugin` holding `grants` (without its log lines): the
    /// grant check, then the request, which fails with `timed-out` if still running at
    /// `deadline`.
    pub async fn send(
        &self,
        plugin: &str,
        grants: &Capabilities,
        request: HttpRequest,
        deadline: Instant,
    ) -> Result<HttpResponse, HostError> {
        let url = grant(plugin, grants, &request.url)?;
        send(self, Caller { plugin, grants }, request, url, deadline).await
    }

    /// Why `address` may not be connected to, or None.
    fn refusal(&self, address: SocketAddr) -> Option<String> {
        if let Some(reason) = network::forbidden_ip(address.ip()) {
            return Some(reason.to_owned());
        }
        // This host's addresses are listed only when the port is an endpoint's.
        if !self
            .refused
            .iter()
            .any(|endpoint| endpoint.port() == address.port())
        {
            return None;
        }
        let own = network::own_addresses();
        self.refused
            .iter()
            .any(|endpoint| network::reaches_same_listener(*endpoint, address, &own))
            .then(|| "the listener of the daemon's IMDS endpoint (`imds.url`)".to_owned())
    }
}

/// The plugin a request is sent for, and its grants (extra CAs, response limit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) grants: &'a Capabilities,
}

/// Sends `request` to the already checked `url`: resolves its host once, refuses the
/// request if any address is forbidden, then connects to exactly those addresses (in
/// order, the first that answers), over TLS for https. A request still running at
/// `deadline` fails with `timed-out`.
pub(crate) async fn send(
    client: &HttpClient,
    caller: Caller<'_>,
    request: HttpRequest,
    url: Url,
    deadline: Instant,
) -> Result<HttpResponse, HostError> {
    let outgoing = outgoing_request(request, &url)?;
    let limit = caller.grants.response_limit().bytes();
    let exchange = async {
        let addresses = checked_addresses(client, &url).await?;
        let stream = connect(&url, &addresses).await?;
        if url.scheme() != "https" {
            return exchange(TokioIo::new(stream), outgoing, limit).await;
        }
        let stream = tls_handshake(client, caller, &url, stream).await?;
        exchange(TokioIo::new(stream), outgoing, limit).await
    };
    match tokio::time::timeout_at(deadline.into(), exchange).await {
        Ok(result) => result,
        Err(_elapsed) => Err(HostError::TimedOut),
    }
}

/// The request as it goes on the wire: origin-form target, the plugin's headers less the
/// dropped ones, and `Host` = the URL's host[:port].
fn outgoing_request(
    request: HttpRequest,
    url: &Url,
) -> Result<hyper::Request<Full<Bytes>>, HostError> {
    let method = hyper::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| HostError::Invalid(format!("`{}` is not an HTTP method", request.method)))?;
    let mut headers = header_map(&request.headers)?;
    headers.insert(header::HOST, host_header(url)?);
    headers
        .entry(header::ACCEPT)
        .or_insert(HeaderValue::from_static("*/*"));
    let target = &url[Position::BeforePath..Position::AfterQuery];
    let uri = target
        .parse::<hyper::Uri>()
        .map_err(|error| HostError::Invalid(format!("`{url}` has no usable path: {error}")))?;
    let mut outgoing = hyper::Request::new(Full::new(Bytes::from(request.body)));
    *outgoing.method_mut() = method;
    *outgoing.uri_mut() = uri;
    *outgoing.headers_mut() = headers;
    Ok(outgoing)
}

/// `host` or `host:port` (the port only when it is not the scheme's default).
fn host_header(url: &Url) -> Result<HeaderValue, HostError> {
    let host = url
        .host_str()
        .ok_or_else(|| HostError::Invalid(format!("`{url}` names no host")))?;
    let value = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    HeaderValue::from_str(&value)
        .map_err(|_| HostError::Invalid(format!("`{url}`: its host cannot be sent")))
}

/// The addresses of `url`'s host (one DNS lookup for a name), each allowed by the rules.
async fn checked_addresses(client: &HttpClient, url: &Url) -> Result<Vec<SocketAddr>, HostError> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| HostError::Invalid(format!("`{url}` names no port")))?;
    let addresses = match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(url::Host::Domain(name)) => resolve(client, name, port).await?,
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
    Ok(addresses)
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

/// A TCP connection to the first of `addresses` that accepts, tried in order.
async fn connect(url: &Url, addresses: &[SocketAddr]) -> Result<TcpStream, HostError> {
    let mut failures = Vec::new();
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                // Small requests go out at once; a failure only costs latency.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(error) => failures.push(format!("{address}: {error}")),
        }
    }
    let host = url.host_str().unwrap_or_default();
    Err(HostError::Failed(format!(
        "cannot connect to {host}: {} (is the service listening?)",
        failures.join("; ")
    )))
}

/// `stream` wrapped in TLS, the server's certificate verified for `url`'s host against the
/// system's CAs and the plugin's `http-ca-file`.
async fn tls_handshake(
    client: &HttpClient,
    caller: Caller<'_>,
    url: &Url,
    stream: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, HostError> {
    let host = url
        .host()
        .ok_or_else(|| HostError::Invalid(format!("`{url}` names no host")))?;
    let server_name = tls::server_name(&host)?;
    let config = client
        .tls
        .config(&caller.grants.http_roots, caller.plugin)
        .await?;
    tokio_rustls::TlsConnector::from(config)
        .connect(server_name, stream)
        .await
        .map_err(|error| tls::handshake_error(&error, &host.to_string(), caller.plugin))
}

/// Aborts the task driving a connection when the exchange ends or is dropped (deadline).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One HTTP/1.1 request on `io`; the response body is read up to `limit` bytes.
async fn exchange<I>(
    io: I,
    request: hyper::Request<Full<Bytes>>,
    limit: usize,
) -> Result<HttpResponse, HostError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(request_error)?;
    let _connection = AbortOnDrop(tokio::spawn(async move {
        // Its errors reach the request or the body read.
        let _ = connection.await;
    }));
    let response = sender.send_request(request).await.map_err(request_error)?;
    let status = response.status().as_u16();
    let headers = response_headers(response.headers());
    let body = read_capped(response.into_body(), limit).await?;
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// The first `limit` bytes of `body`; the rest is not read.
async fn read_capped(mut body: Incoming, limit: usize) -> Result<Vec<u8>, HostError> {
    let mut read = Vec::new();
    while read.len() < limit {
        let Some(frame) = body.frame().await else {
            break;
        };
        if let Ok(data) = frame.map_err(request_error)?.into_data() {
            read.extend_from_slice(&data);
        }
    }
    read.truncate(limit);
    Ok(read)
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

fn request_error(error: hyper::Error) -> HostError {
    HostError::Failed(error_chain(&error))
}

/// The error and its sources on one line ("error sending request: connection refused").
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let causes: Vec<String> = anyhow::Chain::new(error).map(ToString::to_string).collect();
    causes.join(": ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A local server that accepts one connection and never answers (nor closes it).
    pub(crate) async fn silent_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (_socket, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        (address, server)
    }

    #[tokio::test]
    async fn a_request_past_the_deadline_times_out() {
        let (address, _server) = silent_server().await;
        let url = Url::parse(&format!("http://{address}/")).unwrap();
        let request = get_request(&url);
        let deadline = Instant::now() + std::time::Duration::from_millis(200);
        let result = send(&HttpClient::default(), caller(), request, url, deadline).await;
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
        let result = send(&HttpClient::default(), caller(), request, url, deadline).await;
        assert!(matches!(result, Err(HostError::Failed(_))), "{result:?}");
    }

    /// A resolver answering from a fixed table; from the second lookup of a name on it
    /// answers `rebind_to` instead (DNS rebinding), and counts lookups.
    pub(crate) struct TableResolver {
        table: std::collections::HashMap<String, IpAddr>,
        rebind_to: Option<IpAddr>,
        lookups: std::sync::atomic::AtomicUsize,
    }

    impl TableResolver {
        pub(crate) fn new(entries: &[(&str, IpAddr)], rebind_to: Option<IpAddr>) -> Arc<Self> {
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
    pub(crate) async fn recording_server() -> (SocketAddr, tokio::task::JoinHandle<String>) {
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
        send(client, caller(), get_request(&granted), granted, deadline).await
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
            "http://0.0.0.0:9/",
            "http://0.0.0.1:9/",
            "http://[::]:9/",
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
        assert_no_connection(&imds);
    }

    /// Asserts that the (non-blocking) `listener` was never connected to.
    fn assert_no_connection(listener: &std::net::TcpListener) {
        let accepted = listener.accept();
        assert!(
            matches!(&accepted, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
            "the IMDS endpoint got a connection: {accepted:?}"
        );
    }

    #[tokio::test]
    async fn the_imds_endpoints_listener_is_refused_under_every_address_that_reaches_it() {
        // An IMDS endpoint configured as 127.0.0.1:PORT whose listener is bound to every
        // address: reachable as 127.0.0.2, as IPv4-mapped IPv6 and by a name for them.
        let imds = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        imds.set_nonblocking(true).unwrap();
        let port = imds.local_addr().unwrap().port();
        let configured: SocketAddr = ([127, 0, 0, 1], port).into();
        let other_name: IpAddr = "127.0.0.3".parse().unwrap();
        let resolver = TableResolver::new(&[("imds-alias.test", other_name)], None);
        let client = HttpClient::refusing(vec![configured]).with_resolver(resolver);
        for url in [
            format!("http://127.0.0.2:{port}/metadata/scheduledevents"),
            format!("http://[::ffff:127.0.0.2]:{port}/metadata/scheduledevents"),
            format!("http://imds-alias.test:{port}/metadata/scheduledevents"),
        ] {
            let result = send_granted(&client, &url).await;
            assert_never_reachable(&result, &url);
        }
        assert_no_connection(&imds);
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
        let response = send(&client, caller(), request, checked, deadline)
            .await
            .unwrap();
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

    /// A plugin `p` with no grants beyond the URL (checked by the callers).
    pub(crate) fn caller() -> Caller<'static> {
        static NONE: std::sync::OnceLock<Capabilities> = std::sync::OnceLock::new();
        Caller {
            plugin: "p",
            grants: NONE.get_or_init(Capabilities::default),
        }
    }

    /// A bodiless GET of `url`, as a plugin would send it.
    pub(crate) fn get_request(url: &impl std::fmt::Display) -> HttpRequest {
        HttpRequest {
            method: "GET".into(),
            url: url.to_string(),
            headers: vec![],
            body: vec![],
        }
    }
}

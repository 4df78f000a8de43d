//! A local HTTP or HTTPS server for the tests and benchmarks of `http-send`: it answers every
//! connection with one fixed response and hands back each request it read, byte for byte.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

use crate::pki::Pki;

/// A TLS acceptor presenting `NAME.pem` (with `NAME.key`) of `pki`, e.g. "server".
pub fn tls_acceptor(pki: &Pki, name: &str) -> TlsAcceptor {
    let chain = CertificateDer::pem_file_iter(pki.file(&format!("{name}.pem")))
        .expect("certificate file")
        .collect::<Result<Vec<_>, _>>()
        .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(pki.file(&format!("{name}.key"))).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
    TlsAcceptor::from(Arc::new(config))
}

/// A running server on 127.0.0.1; stops when dropped.
pub struct AnsweringServer {
    /// Where it listens.
    pub address: SocketAddr,
    requests: mpsc::UnboundedReceiver<Vec<u8>>,
    task: tokio::task::JoinHandle<()>,
}

impl AnsweringServer {
    /// Serves every connection (over TLS with `tls`) by reading one request and writing
    /// `answer`, then closing.
    pub async fn start(tls: Option<TlsAcceptor>, answer: Vec<u8>) -> AnsweringServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("local address");
        let (sender, requests) = mpsc::unbounded_channel();
        let answer = Arc::new(answer);
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (tls, answer, sender) = (tls.clone(), Arc::clone(&answer), sender.clone());
                tokio::spawn(async move {
                    let request = match tls {
                        None => answer_one(socket, &answer).await,
                        Some(tls) => match tls.accept(socket).await {
                            Ok(stream) => answer_one(stream, &answer).await,
                            Err(_refused_by_the_client) => return,
                        },
                    };
                    let _ = sender.send(request);
                });
            }
        });
        AnsweringServer {
            address,
            requests,
            task,
        }
    }

    /// The next request the server read (head and body), as text.
    pub async fn next_request(&mut self) -> String {
        let request = self.requests.recv().await.expect("the server stopped");
        String::from_utf8_lossy(&request).into_owned()
    }

    /// Whether a request was read that [`next_request`](Self::next_request) did not return.
    pub fn has_more_requests(&mut self) -> bool {
        self.requests.try_recv().is_ok()
    }
}

impl Drop for AnsweringServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (head, then a body of its `content-length`) and writes `answer`.
async fn answer_one<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, answer: &[u8]) -> Vec<u8> {
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    while !complete(&request) {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => request.extend_from_slice(&buffer[..read]),
        }
    }
    let _ = stream.write_all(answer).await;
    let _ = stream.shutdown().await;
    request
}

/// Whether `request` holds its whole head and the body its `content-length` announces.
fn complete(request: &[u8]) -> bool {
    let Some(end) = request.windows(4).position(|window| window == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    request.len() >= end + 4 + length
}

//! A webhook receiver for end-to-end tests: HTTP or HTTPS (rustls) on 127.0.0.1, recording
//! every request (method, path, headers, body); it can answer 500 to, or hang on, the next N.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::harness::wait_for;

/// Plain HTTP or HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http://`
    Http,
    /// `https://`, with a certificate from the caller (e.g. [`crate::pki::Pki`]).
    Https,
}

impl Scheme {
    /// "http" or "https".
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// One request as the receiver read it, and the status it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// `POST`, `GET`, …
    pub method: String,
    /// The request target, e.g. `/slack`.
    pub path: String,
    /// Every header, names lower-cased, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body, as text.
    pub body: String,
    /// What the receiver answered: 200, 500 while told to fail, or [`NO_ANSWER`].
    pub status: u16,
}

impl Received {
    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The status recorded for a request the receiver never answered ([`Receiver::hang_next`]).
pub const NO_ANSWER: u16 = 0;

/// How long the receiver keeps a connection it does not answer.
const HANG_FOR: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
struct Record {
    received: Vec<Received>,
    failures_left: u64,
    hangs_left: u64,
}

impl Record {
    /// The answer to the next request: hang first, then fail, then 200.
    fn next_status(&mut self) -> u16 {
        if self.hangs_left > 0 {
            self.hangs_left -= 1;
            return NO_ANSWER;
        }
        if self.failures_left > 0 {
            self.failures_left -= 1;
            return 500;
        }
        200
    }
}

/// A running receiver; its accept loop runs on a thread for as long as the test does.
#[derive(Debug)]
pub struct Receiver {
    scheme: Scheme,
    address: String,
    record: Arc<Mutex<Record>>,
}

impl Receiver {
    /// A plain HTTP receiver.
    pub fn http() -> Receiver {
        Receiver::start(Scheme::Http, None)
    }

    /// An HTTPS receiver presenting `cert_pem` (chain) with `key_pem`.
    pub fn https(cert_pem: &Path, key_pem: &Path) -> Receiver {
        Receiver::start(Scheme::Https, Some(tls_config(cert_pem, key_pem)))
    }

    fn start(scheme: Scheme, tls: Option<Arc<ServerConfig>>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the webhook receiver");
        let address = listener.local_addr().expect("its address").to_string();
        let record = Arc::new(Mutex::new(Record::default()));
        let shared = record.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let record = shared.clone();
                let tls = tls.clone();
                std::thread::spawn(move || serve(stream, tls, &record));
            }
        });
        Receiver {
            scheme,
            address,
            record,
        }
    }

    /// `127.0.0.1:PORT`, as a plugin's `[capabilities] http` entry.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// `SCHEME://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme.as_str(), self.address)
    }

    /// Answers 500 to the next `count` requests (`u64::MAX`: to every request).
    pub fn fail_next(&self, count: u64) {
        self.record.lock().expect("receiver lock").failures_left = count;
    }

    /// Reads the next `count` requests but never answers them (each connection is held
    /// open for 30 s, then dropped).
    pub fn hang_next(&self, count: u64) {
        self.record.lock().expect("receiver lock").hangs_left = count;
    }

    /// Every request so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.record.lock().expect("receiver lock").received.clone()
    }

    /// Waits until at least `count` requests arrived; returns them all.
    pub fn wait_for_count(&self, count: usize, timeout: Duration) -> Vec<Received> {
        wait_for(
            timeout,
            &format!("{count} requests at the receiver"),
            || {
                let received = self.received();
                if received.len() >= count {
                    Ok(received)
                } else {
                    Err(format!("{received:#?}"))
                }
            },
        )
    }
}

fn tls_config(cert_pem: &Path, key_pem: &Path) -> Arc<ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_pem)
        .and_then(Iterator::collect)
        .unwrap_or_else(|error| panic!("read {}: {error}", cert_pem.display()));
    let key = PrivateKeyDer::from_pem_file(key_pem)
        .unwrap_or_else(|error| panic!("read {}: {error}", key_pem.display()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("rustls protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a usable server certificate and key");
    Arc::new(config)
}

/// Serves one request on `stream` (through TLS when `tls` is set), then closes it.
fn serve(stream: TcpStream, tls: Option<Arc<ServerConfig>>, record: &Mutex<Record>) {
    let _ignored = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(tls) = tls else {
        let _ignored = exchange(stream, record);
        return;
    };
    let Ok(connection) = rustls::ServerConnection::new(tls) else {
        return;
    };
    let mut tls_stream = rustls::StreamOwned::new(connection, stream);
    if exchange(&mut tls_stream, record).is_ok() {
        tls_stream.conn.send_close_notify();
        let _ignored = tls_stream.flush();
    }
}

/// Reads one HTTP/1.1 request (body by `content-length`), records it, answers.
fn exchange(mut stream: impl Read + Write, record: &Mutex<Record>) -> std::io::Result<()> {
    let mut reader = BufReader::new(&mut stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let headers = read_headers(&mut reader)?;
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    drop(reader);
    let mut parts = request_line.split_whitespace();
    let status = {
        let mut record = record.lock().expect("receiver lock");
        let status = record.next_status();
        record.received.push(Received {
            method: parts.next().unwrap_or("").to_owned(),
            path: parts.next().unwrap_or("").to_owned(),
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            status,
        });
        status
    };
    if status == NO_ANSWER {
        std::thread::sleep(HANG_FOR);
        return Ok(());
    }
    let text = if status == 200 {
        "ok"
    } else {
        "failing on purpose"
    };
    write!(
        stream,
        "HTTP/1.1 {status} {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        if status == 200 {
            "OK"
        } else {
            "Internal Server Error"
        },
        text.len()
    )?;
    stream.flush()
}

fn read_headers(reader: &mut impl BufRead) -> std::io::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            return Ok(headers);
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use rustls::pki_types::ServerName;

    use super::*;
    use crate::pki::Pki;

    /// POSTs `body` to `receiver`'s `path` over TLS, trusting `ca_pem`; the answer's text.
    fn post_over_tls(receiver: &Receiver, ca_pem: &Path, path: &str, body: &str) -> String {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca_pem).expect("read the CA") {
            roots
                .add(cert.expect("a CA certificate"))
                .expect("add the CA");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("rustls protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("localhost").expect("a server name");
        let connection =
            rustls::ClientConnection::new(Arc::new(config), name).expect("a TLS client");
        let socket = TcpStream::connect(receiver.address()).expect("connect");
        let mut stream = rustls::StreamOwned::new(connection, socket);
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut answer = String::new();
        let _ignored = stream.read_to_string(&mut answer);
        answer
    }

    #[test]
    fn records_https_requests_and_fails_the_first_ones_when_told() {
        let pki = Pki::generate();
        let receiver = Receiver::https(
            Path::new(&pki.file("server.pem")),
            Path::new(&pki.file("server.key")),
        );
        assert!(receiver.url("/x").starts_with("https://127.0.0.1:"));
        receiver.fail_next(1);
        let ca = PathBuf::from(pki.file("ca.pem"));
        let first = post_over_tls(&receiver, &ca, "/hook", "{\"a\":1}");
        let second = post_over_tls(&receiver, &ca, "/hook", "{\"a\":2}");
        assert!(first.starts_with("HTTP/1.1 500 "), "{first}");
        assert!(second.starts_with("HTTP/1.1 200 OK"), "{second}");
        let received = receiver.received();
        let seen: Vec<(&str, &str, u16)> = received
            .iter()
            .map(|r| (r.path.as_str(), r.body.as_str(), r.status))
            .collect();
        assert_eq!(
            seen,
            [("/hook", "{\"a\":1}", 500), ("/hook", "{\"a\":2}", 200)]
        );
        assert_eq!(received[0].method, "POST");
        assert_eq!(received[0].header("content-type"), Some("application/json"));
    }
}

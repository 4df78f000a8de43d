//! A small OCI registry on loopback, written for the hostile-case tests of `forewarn plugin
//! install`: it stores what is pushed and serves it back, and can be told to misbehave — a
//! blob altered after upload, a download that dies half-way, a redirect to another host, a
//! manifest far larger than any plugin's, a blob dripped a byte at a time, a blob far larger
//! than its descriptor, an upload forbidden. Plain HTTP/1.1, one thread per connection, every
//! answer closes its connection.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use forewarn_supply::reference::Digest;

/// How the registry misbehaves.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Serve this blob with one byte changed (its size unchanged).
    pub alter_blob: Option<String>,
    /// Send half of this blob, then close the connection.
    pub die_during_blob: Option<String>,
    /// Answer blob downloads with a redirect to this base URL (another host).
    pub redirect_blobs_to: Option<String>,
    /// Serve every manifest padded to this many bytes.
    pub pad_manifests_to: Option<usize>,
    /// Send this blob one byte at a time, one every `interval` (a registry that never
    /// quite stops answering).
    pub drip_blob: Option<Drip>,
    /// Send this blob followed by padding, without a `Content-Length` (the body ends when
    /// the connection closes), counting what the client took.
    pub oversize_blob: Option<Oversize>,
    /// Answer every upload (POST, PUT) 403 Forbidden, as a registry does to a user who may
    /// pull but not push.
    pub forbid_uploads: bool,
}

/// A blob sent a byte at a time.
#[derive(Debug, Clone)]
pub struct Drip {
    /// The blob's digest.
    pub digest: String,
    /// The pause between two bytes.
    pub interval: Duration,
}

/// A blob sent larger than it is.
#[derive(Debug, Clone)]
pub struct Oversize {
    /// The blob's digest.
    pub digest: String,
    /// How many bytes to send in all (the blob, then zeros).
    pub send: usize,
    /// How many bytes the client accepted before it closed the connection.
    pub sent: Arc<AtomicU64>,
}

/// What the registry holds and how it behaves; tests change it between requests.
#[derive(Debug, Default)]
pub struct RegistryState {
    /// `repo:tag` and `repo@digest` → manifest bytes.
    pub manifests: HashMap<String, Vec<u8>>,
    /// digest → blob bytes.
    pub blobs: HashMap<String, Vec<u8>>,
    /// The faults in force.
    pub faults: Faults,
    /// "METHOD PATH" of every request, in order.
    pub requests: Vec<String>,
}

/// A running fake registry; stopped when dropped.
pub struct FakeRegistry {
    address: String,
    /// What it holds; lock it to look or to change its faults.
    pub state: Arc<Mutex<RegistryState>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeRegistry {
    /// Starts an empty registry on a free loopback port.
    pub fn start() -> FakeRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let address = listener.local_addr().expect("a local address").to_string();
        let state = Arc::new(Mutex::new(RegistryState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let uploads = Arc::new(AtomicUsize::new(0));
        let thread = {
            let state = state.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let state = state.clone();
                    let uploads = uploads.clone();
                    std::thread::spawn(move || {
                        let _ = serve(stream, &state, &uploads);
                    });
                }
            })
        };
        FakeRegistry {
            address,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Changes the faults.
    pub fn set_faults(&self, faults: Faults) {
        self.state.lock().expect("state").faults = faults;
    }

    /// The manifest stored under `repo:reference`.
    pub fn manifest(&self, repo: &str, reference: &str) -> Option<Vec<u8>> {
        let state = self.state.lock().expect("state");
        state.manifests.get(&key(repo, reference)).cloned()
    }

    /// Stores `bytes` as the manifest `repo:reference` (a tag), and under its digest.
    pub fn put_manifest(&self, repo: &str, reference: &str, bytes: Vec<u8>) {
        let mut state = self.state.lock().expect("state");
        let digest = Digest::of(&bytes).to_string();
        state.manifests.insert(key(repo, &digest), bytes.clone());
        state.manifests.insert(key(repo, reference), bytes);
    }
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn key(repo: &str, reference: &str) -> String {
    match reference.starts_with("sha256:") {
        true => format!("{repo}@{reference}"),
        false => format!("{repo}:{reference}"),
    }
}

struct Request {
    method: String,
    path: String,
    query: String,
    body: Vec<u8>,
}

fn read_request(stream: &TcpStream) -> std::io::Result<Request> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path.to_owned(), query.to_owned()),
        None => (target, String::new()),
    };
    Ok(Request {
        method,
        path,
        query,
        body,
    })
}

fn respond(
    mut stream: &TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let mut text = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()
}

fn serve(
    stream: TcpStream,
    state: &Mutex<RegistryState>,
    uploads: &AtomicUsize,
) -> std::io::Result<()> {
    let request = match read_request(&stream) {
        Ok(request) => request,
        // What is not HTTP (a TLS ClientHello: https:// to this plain-HTTP registry) is
        // answered as HTTP servers answer it (docker-registry's Go server among them).
        Err(error) => {
            let _ = respond(&stream, "400 Bad Request", &[], b"not HTTP", false);
            return Err(error);
        }
    };
    let head = request.method == "HEAD";
    let mut state = state.lock().expect("state");
    state
        .requests
        .push(format!("{} {}", request.method, request.path));
    let not_found = |stream: &TcpStream| {
        respond(
            stream,
            "404 Not Found",
            &[],
            br#"{"errors":[{"code":"NOT_FOUND","message":"not found"}]}"#,
            head,
        )
    };
    let Some(rest) = request.path.strip_prefix("/v2/") else {
        return not_found(&stream);
    };
    if rest.is_empty() {
        return respond(&stream, "200 OK", &[], b"{}", head);
    }
    if state.faults.forbid_uploads && matches!(request.method.as_str(), "POST" | "PUT") {
        return respond(
            &stream,
            "403 Forbidden",
            &[],
            br#"{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}"#,
            false,
        );
    }
    if let Some((repo, reference)) = rest.split_once("/manifests/") {
        if request.method == "PUT" {
            let digest = Digest::of(&request.body).to_string();
            state
                .manifests
                .insert(key(repo, &digest), request.body.clone());
            state.manifests.insert(key(repo, reference), request.body);
            return respond(
                &stream,
                "201 Created",
                &[("Docker-Content-Digest", digest)],
                b"",
                false,
            );
        }
        let Some(mut bytes) = state.manifests.get(&key(repo, reference)).cloned() else {
            return not_found(&stream);
        };
        let digest = Digest::of(&bytes).to_string();
        if let Some(size) = state.faults.pad_manifests_to {
            bytes.resize(size, b' ');
        }
        let headers = [
            (
                "Content-Type",
                "application/vnd.oci.image.manifest.v1+json".to_owned(),
            ),
            ("Docker-Content-Digest", digest),
        ];
        return respond(&stream, "200 OK", &headers, &bytes, head);
    }
    if let Some((repo, _)) = rest.split_once("/blobs/uploads/") {
        if request.method == "POST" {
            let id = uploads.fetch_add(1, Ordering::SeqCst);
            let location = format!("/v2/{repo}/blobs/uploads/u{id}");
            return respond(
                &stream,
                "202 Accepted",
                &[("Location", location)],
                b"",
                false,
            );
        }
        let digest = request
            .query
            .split('&')
            .find_map(|pair| pair.strip_prefix("digest="))
            .unwrap_or_default()
            .replace("%3A", ":");
        state.blobs.insert(digest, request.body);
        return respond(&stream, "201 Created", &[], b"", false);
    }
    if let Some((_, digest)) = rest.split_once("/blobs/") {
        let Some(mut bytes) = state.blobs.get(digest).cloned() else {
            return not_found(&stream);
        };
        let faults = state.faults.clone();
        drop(state);
        if let Some(base) = &faults.redirect_blobs_to
            && !head
        {
            return respond(
                &stream,
                "307 Temporary Redirect",
                &[("Location", format!("{base}/{digest}"))],
                b"",
                false,
            );
        }
        if faults.alter_blob.as_deref() == Some(digest)
            && let Some(first) = bytes.first_mut()
        {
            *first ^= 0xff;
        }
        if let Some(drip) = faults
            .drip_blob
            .as_ref()
            .filter(|drip| drip.digest == digest)
            && !head
        {
            let mut stream = &stream;
            let header = format!(
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            );
            stream.write_all(header.as_bytes())?;
            for byte in &bytes {
                std::thread::sleep(drip.interval);
                stream.write_all(std::slice::from_ref(byte))?;
                stream.flush()?;
            }
            return Ok(());
        }
        if let Some(oversize) = faults
            .oversize_blob
            .as_ref()
            .filter(|oversize| oversize.digest == digest)
            && !head
        {
            let mut stream = &stream;
            stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")?;
            bytes.resize(oversize.send.max(bytes.len()), 0);
            for chunk in bytes.chunks(64 * 1024) {
                stream.write_all(chunk)?;
                oversize
                    .sent
                    .fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
            return stream.flush();
        }
        if faults.die_during_blob.as_deref() == Some(digest) && !head {
            let mut stream = &stream;
            let header = format!(
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            );
            stream.write_all(header.as_bytes())?;
            stream.write_all(&bytes[..bytes.len() / 2])?;
            stream.flush()?;
            return stream.shutdown(std::net::Shutdown::Both);
        }
        return respond(
            &stream,
            "200 OK",
            &[("Docker-Content-Digest", digest.to_owned())],
            &bytes,
            head,
        );
    }
    not_found(&stream)
}

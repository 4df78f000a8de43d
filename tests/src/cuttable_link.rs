//! A TCP forwarder on loopback that a test can cut and restore: one VM's network to etcd
//! going away while the others keep theirs. Cut, it closes every connection it carries and
//! drops each new one as soon as it is accepted (the client sees a reset, as behind a dead
//! link); restored, it forwards again.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The forwarder: `address` leads to the target while the link is up.
pub struct CuttableLink {
    /// `127.0.0.1:PORT`, to give the client instead of the target.
    pub address: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl CuttableLink {
    /// Forwards a new loopback port to `target` (`host:port`).
    pub fn start(target: &str) -> CuttableLink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let address = listener.local_addr().expect("local address").to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (target, accept_cut, accept_open) = (target.to_owned(), cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if accept_cut.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                forward(client, server, &accept_open);
            }
        });
        CuttableLink { address, cut, open }
    }

    /// Cuts the link: every connection closes, new ones are dropped.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for stream in open.drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Restores the link: new connections are forwarded again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies both ways between `client` and `server` on two threads, keeping clones of both
/// in `open` so that a cut can close them.
fn forward(client: TcpStream, server: TcpStream, open: &Mutex<Vec<TcpStream>>) {
    let clones = (client.try_clone(), server.try_clone());
    let (Ok(client_back), Ok(server_back)) = clones else {
        return;
    };
    {
        let mut open = open.lock().unwrap_or_else(|p| p.into_inner());
        for stream in [&client, &server] {
            if let Ok(clone) = stream.try_clone() {
                open.push(clone);
            }
        }
    }
    std::thread::spawn(move || copy(client, server));
    std::thread::spawn(move || copy(server_back, client_back));
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                if to.write_all(&buffer[..read]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

//! Proves the client ignores proxy settings from the environment: with HTTP_PROXY and
//! ALL_PROXY pointing at a dead port, a request still reaches the server directly.

use std::io::{Read, Write};
use std::net::TcpListener;

use forewarn_imds::{ClientConfig, ImdsClient};

#[tokio::test]
async fn proxy_variables_are_ignored() {
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_proxy = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    // SAFETY: this test binary has this one test, so no other thread reads the environment.
    unsafe {
        for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
            std::env::set_var(name, &dead_proxy);
        }
        std::env::remove_var("NO_PROXY");
        std::env::remove_var("no_proxy");
    }

    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}", server.local_addr().unwrap());
    let answer = std::thread::spawn(move || {
        let (mut stream, _) = server.accept().unwrap();
        let mut request = vec![0u8; 4096];
        let read = stream.read(&mut request).unwrap();
        let body = r#"{"name":"direct"}"#;
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).unwrap();
        String::from_utf8_lossy(&request[..read]).to_string()
    });

    let client = ImdsClient::new(ClientConfig {
        base_url,
        ..ClientConfig::default()
    })
    .unwrap();
    assert_eq!(client.fetch_vm_name().await.unwrap(), "direct");
    let request = answer.join().unwrap().to_ascii_lowercase();
    assert!(
        request.starts_with("get /metadata/instance/compute?"),
        "{request}"
    );
    assert!(request.contains("metadata: true"), "{request}");
    assert!(!request.contains("x-forwarded-for"), "{request}");
}

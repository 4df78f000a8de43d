use super::*;

#[test]
fn prefix_end_is_the_next_key_after_every_prefixed_one() {
    assert_eq!(prefix_end("/f/"), b"/f0".to_vec());
    assert_eq!(prefix_end(""), vec![0]);
}

#[test]
fn ranges_decode_keys_values_and_leases() {
    let body = r#"{"header":{},"kvs":[{"key":"L2YvbA==","create_revision":"2","mod_revision":"5","value":"dm0tYQ==","lease":"7587899075636302855"}],"count":"1"}"#;
    let answer: RangeAnswer = serde_json::from_str(body).unwrap();
    let kvs = answer.key_values();
    assert_eq!(
        kvs,
        vec![KeyValue {
            key: "/f/l".into(),
            value: "vm-a".into(),
            lease: 7587899075636302855,
            mod_revision: 5,
        }]
    );
    let empty: RangeAnswer = serde_json::from_str(r#"{"header":{}}"#).unwrap();
    assert!(empty.key_values().is_empty());
}

#[tokio::test]
async fn an_answer_over_the_cap_is_refused_naming_the_cap() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let length = ETCD_BODY_MAX_BYTES + 1;
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {length}\r\n\r\n");
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(&vec![b' '; length]).await;
    });
    let client = EtcdClient::connect(&crate::settings::one_endpoint(&endpoint)).unwrap();
    let error = client.list("/forewarn/").await.unwrap_err();
    let EtcdError::Unreachable { message, .. } = &error else {
        panic!("expected the cap to refuse the answer, got {error:?}");
    };
    assert!(
        message.contains(&format!("larger than {ETCD_BODY_MAX_BYTES} bytes")),
        "{message}"
    );
}

/// A stand-in member on loopback answering every request to `path…` with the status
/// and body `answer` gives (one request per connection); its endpoint.
async fn fake_member(answer: impl Fn(&str) -> (u16, &'static str) + Send + 'static) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = [0u8; 4096];
            let read = socket.read(&mut request).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&request[..read]).into_owned();
            let path = request.split(' ').nth(1).unwrap_or("").to_owned();
            let (status, body) = answer(&path);
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        }
    });
    endpoint
}

fn settings(endpoints: &[&str]) -> EtcdSettings {
    EtcdSettings {
        endpoints: endpoints.iter().map(|e| (*e).to_owned()).collect(),
        ..EtcdSettings::default()
    }
}

const NO_LEADER: (u16, &str) = (
    503,
    r#"{"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14}"#,
);
const STATUS_WITHOUT_LEADER: (u16, &str) = (200, r#"{"header":{},"version":"3.4.23"}"#);

/// A member answering every request "no leader", and its status with `status`.
async fn failing_member_whose_status_is(status: (u16, &'static str)) -> String {
    fake_member(move |path| {
        if path == STATUS_PATH {
            status
        } else {
            NO_LEADER
        }
    })
    .await
}

#[tokio::test]
async fn a_member_answering_5xx_is_passed_over_for_the_next_endpoint() {
    let sick = fake_member(|_| NO_LEADER).await;
    let well = fake_member(|_| (200, r#"{"header":{},"kvs":[]}"#)).await;
    let client = EtcdClient::connect(&settings(&[&sick, &well])).unwrap();
    assert_eq!(client.list("/forewarn/").await.unwrap(), Vec::new());
    assert_eq!(client.preferred_endpoint(), well);
}

#[tokio::test]
async fn members_answering_without_a_leader_mean_the_quorum_is_lost() {
    let survivor = failing_member_whose_status_is(STATUS_WITHOUT_LEADER).await;
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let client = EtcdClient::connect(&settings(&[&down, &survivor])).unwrap();
    let error = client.list("/forewarn/").await.unwrap_err();
    let EtcdError::NoQuorum {
        answering, silent, ..
    } = &error
    else {
        panic!("expected a lost quorum, got {error:?}");
    };
    assert_eq!(answering, &vec![survivor]);
    assert_eq!(silent, &vec![down]);
    assert!(
        error.to_string().starts_with("etcd has lost its quorum: "),
        "{error}"
    );

    // A member that knows a leader: the failure is something else, and stays as it was.
    let led = failing_member_whose_status_is((200, r#"{"header":{},"leader":"42"}"#)).await;
    let client = EtcdClient::connect(&settings(&[&led])).unwrap();
    let error = client.list("/forewarn/").await.unwrap_err();
    assert!(
        matches!(error, EtcdError::Refused { status: 503, .. }),
        "{error:?}"
    );

    // Something that is not etcd (no `header` in its answers) is no sign of a lost quorum.
    let stranger = failing_member_whose_status_is((200, "{}")).await;
    let client = EtcdClient::connect(&settings(&[&stranger])).unwrap();
    let error = client.list("/forewarn/").await.unwrap_err();
    assert!(
        matches!(error, EtcdError::Refused { status: 503, .. }),
        "{error:?}"
    );
}

#[test]
fn errors_name_settings_as_keys_of_a_section() {
    let unreachable = EtcdError::Unreachable {
        endpoint: "https://10.0.0.4:2379".into(),
        message: "invalid peer certificate: UnknownIssuer".into(),
        certificate: true,
    };
    assert_eq!(
        unreachable.describe("coordination"),
        "cannot reach etcd at https://10.0.0.4:2379: invalid peer certificate: UnknownIssuer \
             (check `coordination.ca-file`, `cert-file` and `key-file`) (is etcd running, and is \
             `coordination.endpoints` right?)"
    );
    assert!(
        unreachable
            .to_string()
            .contains("(check `ca-file`, `cert-file`")
    );
    let refused = EtcdError::Refused {
        endpoint: "http://a:2379".into(),
        path: AUTH_PATH.into(),
        status: 400,
        message: "etcdserver: authentication failed, invalid user ID or password".into(),
    };
    assert!(
        refused
            .describe("coordination")
            .ends_with("(check `coordination.username` and `coordination.password`)")
    );
    let error = EtcdClient::connect(&EtcdSettings::default()).unwrap_err();
    assert!(
        error
            .describe("coordination")
            .starts_with("key `coordination.endpoints`: name at least one"),
        "{error}"
    );
}

#[test]
fn gateway_errors_are_shown_by_their_message() {
    let body = r#"{"error":"etcdserver: invalid auth token","code":16,"message":"etcdserver: invalid auth token"}"#;
    assert_eq!(
        gateway_error_message(body),
        "etcdserver: invalid auth token"
    );
    assert_eq!(gateway_error_message("oops"), "oops");
    let streamed = r#"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}"#;
    assert_eq!(gateway_error_message(streamed), "etcdserver: no leader");
}

#[tokio::test]
async fn a_request_answered_leader_changed_everywhere_is_sent_again_once_a_leader_is_known() {
    // A member that answered "leader changed" to the first range (an election after another
    // member died) and serves the next one; its status knows the new leader.
    let ranges = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = ranges.clone();
    let member = fake_member(move |path| {
        if path == STATUS_PATH {
            return (200, r#"{"header":{},"leader":"42"}"#);
        }
        match counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => (
                503,
                r#"{"error":"etcdserver: leader changed","message":"etcdserver: leader changed","code":14}"#,
            ),
            _ => (200, r#"{"header":{},"kvs":[]}"#),
        }
    })
    .await;
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let client = EtcdClient::connect(&settings(&[&down, &member])).unwrap();
    assert_eq!(client.list("/forewarn/").await.unwrap(), Vec::new());
    assert_eq!(ranges.load(std::sync::atomic::Ordering::SeqCst), 2);
}

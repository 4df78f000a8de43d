//! The etcd v3 JSON gateway's wire format: base64 keys and values, 64-bit integers as strings,
//! request bodies for puts, compares and writes, and its error bodies.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Compare, KeyValue, Write};

/// A 64-bit integer that the gateway writes as a string (or, leniently, a number).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Int(pub(super) i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(text) => text.parse().map(Int).map_err(serde::de::Error::custom),
            Value::Number(number) => number
                .as_i64()
                .map(Int)
                .ok_or_else(|| serde::de::Error::custom("not a 64-bit integer")),
            other => Err(serde::de::Error::custom(format!(
                "expected an integer, got {other}"
            ))),
        }
    }
}

#[derive(Deserialize, Default)]
pub(super) struct RangeAnswer {
    #[serde(default)]
    kvs: Vec<RawKeyValue>,
    /// More keys are in the range than `limit` let through.
    #[serde(default)]
    pub(super) more: bool,
}

#[derive(Deserialize)]
pub(super) struct RawKeyValue {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
    #[serde(default)]
    lease: Int,
    #[serde(default)]
    mod_revision: Int,
}

impl RangeAnswer {
    pub(super) fn key_values(self) -> Vec<KeyValue> {
        self.kvs
            .into_iter()
            .map(|raw| KeyValue {
                key: decode(&raw.key),
                value: decode(&raw.value),
                lease: raw.lease.0,
                mod_revision: raw.mod_revision.0,
            })
            .collect()
    }
}

pub(super) fn put_body(key: &str, value: &str, lease: i64) -> Value {
    let mut body = json!({ "key": encode(key), "value": encode(value) });
    if lease != 0 {
        body["lease"] = json!(lease.to_string());
    }
    body
}

pub(super) fn compare_body(compare: &Compare) -> Value {
    match compare {
        Compare::Absent(key) => {
            json!({ "key": encode(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0" })
        }
        Compare::Present(key) => {
            json!({ "key": encode(key), "target": "CREATE", "result": "GREATER", "create_revision": "0" })
        }
        Compare::ValueIs(key, value) => {
            json!({ "key": encode(key), "target": "VALUE", "result": "EQUAL", "value": encode(value) })
        }
        Compare::ModRevisionIs(key, revision) => {
            json!({ "key": encode(key), "target": "MOD", "result": "EQUAL", "mod_revision": revision.to_string() })
        }
    }
}

pub(super) fn write_body(write: &Write) -> Value {
    match write {
        Write::Put { key, value, lease } => json!({ "request_put": put_body(key, value, *lease) }),
        Write::Delete(key) => json!({ "request_delete_range": { "key": encode(key) } }),
    }
}

pub(super) fn encode(text: &str) -> String {
    BASE64.encode(text.as_bytes())
}

pub(super) fn encode_bytes(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// Keys are forewarn's own UTF-8 text; anything else is shown lossily.
pub(super) fn decode(base64: &str) -> String {
    let bytes = BASE64.decode(base64).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The range end that selects every key starting with `prefix` (last byte plus one).
pub(super) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff (or the prefix was empty): "\0" means "to the end of the keyspace".
    vec![0]
}

/// The gateway's `{"error": …, "message": …, "code": …}` (streaming paths nest it:
/// `{"error": {"message": …, "http_code": …}}`), or the body itself.
pub(super) fn gateway_error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        value
            .get("message")
            .or_else(|| value.get("error"))
            .and_then(|message| {
                message
                    .as_str()
                    .or_else(|| message.get("message")?.as_str())
            })
            .map(str::to_owned)
    });
    message.unwrap_or_else(|| truncate(body, 200))
}

/// An error with its causes, e.g. "client error (Connect): invalid peer certificate: UnknownIssuer".
pub(super) fn describe_error(error: &(dyn std::error::Error + 'static)) -> String {
    let causes: Vec<String> = anyhow::Chain::new(error).map(ToString::to_string).collect();
    causes.join(": ")
}

pub(super) fn truncate(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

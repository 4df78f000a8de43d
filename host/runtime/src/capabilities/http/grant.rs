//! Which URLs a plugin may send requests to: the `host:port` pairs its manifest grants.

use url::Url;

use crate::wit::latest::HostError;
use forewarn_manifest::Capabilities;

/// The parsed `url` when `plugin`'s grants name its `host:port` (host compared without
/// regard to case, port exact; the port defaults to 80 for http, 443 for https). A URL that
/// cannot be judged (not absolute, not http(s), no host) is `invalid`.
pub(crate) fn grant(plugin: &str, grants: &Capabilities, url: &str) -> Result<Url, HostError> {
    let parsed = parse_http_url(url)?;
    let authority = authority_of(&parsed)
        .ok_or_else(|| HostError::Invalid(format!("`{url}` names no host")))?;
    let granted = grants
        .http
        .iter()
        .any(|entry| entry.trim().eq_ignore_ascii_case(&authority));
    if granted {
        return Ok(parsed);
    }
    Err(HostError::NotGranted(format!(
        "plugin `{plugin}` may not send HTTP requests to {authority}: add \"{authority}\" to \
         [capabilities] http in {plugin}.toml"
    )))
}

/// `url` parsed, when it is an absolute `http://` or `https://` URL.
fn parse_http_url(url: &str) -> Result<Url, HostError> {
    let parsed = Url::parse(url)
        .map_err(|error| HostError::Invalid(format!("`{url}` is not an absolute URL: {error}")))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(HostError::Invalid(format!(
            "`{url}`: scheme `{other}` is not supported; use http:// or https://"
        ))),
    }
}

/// `host:port` of an http or https URL, host in lower case, with the scheme's default port filled in.
fn authority_of(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{}:{port}", host.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::testing::{Expected, check_rows, grants};

    #[test]
    fn http_is_granted_by_host_and_port_exactly() {
        let list = grants(false, &["127.0.0.1:8080", "Backend.Local:80"], &[]);
        let rows = [
            (&list, "http://127.0.0.1:8080/checkpoint", Expected::Granted),
            (
                &list,
                "http://127.0.0.1:8081/checkpoint",
                Expected::Refused("add \"127.0.0.1:8081\" to [capabilities] http in p.toml"),
            ),
            (
                &list,
                "http://127.0.0.1/",
                Expected::Refused("127.0.0.1:80"),
            ),
            (&list, "http://backend.local/x", Expected::Granted),
            (&list, "http://BACKEND.local:80/x", Expected::Granted),
            (&list, "http://backend.local:8080/x", Expected::Refused("")),
            (&list, "http://evil.example:8080/", Expected::Refused("")),
            (
                &list,
                "http://127.0.0.1:8080@evil.example:8080/",
                Expected::Refused("evil.example:8080"),
            ),
            (
                &grants(true, &[], &[]),
                "http://10.0.0.9:9000/x",
                Expected::Refused(
                    "plugin `p` may not send HTTP requests to 10.0.0.9:9000: add \
                     \"10.0.0.9:9000\" to [capabilities] http in p.toml",
                ),
            ),
            (&list, "not a url", Expected::Invalid),
            (&list, "/relative", Expected::Invalid),
            (&list, "ftp://127.0.0.1/", Expected::Invalid),
            (
                &list,
                "https://127.0.0.1:8080/checkpoint",
                Expected::Granted,
            ),
            (&list, "HTTPS://backend.local:80/x", Expected::Granted),
            (
                &list,
                "https://backend.local/x",
                Expected::Refused("add \"backend.local:443\" to [capabilities] http in p.toml"),
            ),
            (&list, "wss://127.0.0.1:8080/", Expected::Invalid),
            (&list, "file:///etc/passwd", Expected::Invalid),
        ];
        check_rows(&rows, |grants, url| grant("p", grants, url));
    }
}

//! The errors the daemon answers for a capability the manifest does not grant, word for word
//! (each capability's `grant` in host/runtime/src/capabilities/), so a plugin's tests see what production would show.

use crate::HostError;

/// `set-ready` without `[capabilities] readiness = true`.
pub(crate) fn readiness(plugin: &str) -> HostError {
    HostError::NotGranted(format!(
        "plugin `{plugin}` may not change readiness: add `readiness = true` under \
         [capabilities] in its manifest"
    ))
}

/// `http-send` to a URL nothing answers: not granted when it is an http(s) URL with a host,
/// invalid otherwise.
pub(crate) fn http(plugin: &str, url: &str) -> HostError {
    match authority_of(url) {
        Ok(authority) => HostError::NotGranted(format!(
            "plugin `{plugin}` may not send HTTP requests to {authority}: add \"{authority}\" \
             to [capabilities] http in {plugin}.toml"
        )),
        Err(invalid) => invalid,
    }
}

/// `run-action` of an action not granted.
pub(crate) fn action(plugin: &str, name: &str) -> HostError {
    HostError::NotGranted(format!(
        "plugin `{plugin}` may not run action `{name}`: add \"{name}\" to [capabilities] \
         actions in {plugin}.toml"
    ))
}

/// `azure-access-token` for a resource not granted.
pub(crate) fn identity(plugin: &str, resource: &str) -> HostError {
    HostError::NotGranted(format!(
        "plugin `{plugin}` may not ask for access tokens for `{resource}`: add \"{resource}\" \
         to [capabilities] azure-identity in {plugin}.toml"
    ))
}

/// `host:port` of an http(s) URL, host in lower case, the scheme's default port filled in.
fn authority_of(url: &str) -> Result<String, HostError> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(HostError::Invalid(format!(
            "`{url}` is not an absolute URL: relative URL without a base"
        )));
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        other => {
            return Err(HostError::Invalid(format!(
                "`{url}`: scheme `{other}` is not supported; use http:// or https://"
            )));
        }
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    if host_port.is_empty() {
        return Err(HostError::Invalid(format!("`{url}` names no host")));
    }
    let has_port = host_port
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && !port.contains(']'));
    let host_port = host_port.to_ascii_lowercase();
    if has_port {
        Ok(host_port)
    } else {
        Ok(format!(
            "{}:{default_port}",
            host_port.trim_end_matches(':')
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_fills_in_the_default_port_and_lowers_the_host() {
        assert_eq!(
            authority_of("http://LB.local/drain").as_deref(),
            Ok("lb.local:80")
        );
        assert_eq!(
            authority_of("https://hooks.example").as_deref(),
            Ok("hooks.example:443")
        );
        assert_eq!(
            authority_of("http://user@127.0.0.1:8080/x?y").as_deref(),
            Ok("127.0.0.1:8080")
        );
        assert_eq!(authority_of("http://[::1]/").as_deref(), Ok("[::1]:80"));
        assert_eq!(
            authority_of("http://[::1]:9000/").as_deref(),
            Ok("[::1]:9000")
        );
    }

    #[test]
    fn unusable_urls_are_invalid_not_refused() {
        assert!(matches!(http("p", "ftp://x/"), HostError::Invalid(_)));
        assert!(matches!(http("p", "/relative"), HostError::Invalid(_)));
        assert!(matches!(http("p", "http:///path"), HostError::Invalid(_)));
    }

    #[test]
    fn refusals_name_the_manifest_setting() {
        let refused = http("notify", "https://hooks.slack.com/services/T/B/x");
        assert_eq!(
            refused.to_string(),
            "not granted: plugin `notify` may not send HTTP requests to hooks.slack.com:443: \
             add \"hooks.slack.com:443\" to [capabilities] http in notify.toml"
        );
        assert!(
            action("p", "stop-app")
                .to_string()
                .contains("actions in p.toml")
        );
        assert!(readiness("p").to_string().contains("readiness = true"));
        assert!(
            identity("p", "https://storage.azure.com/")
                .to_string()
                .contains("azure-identity in p.toml")
        );
    }
}

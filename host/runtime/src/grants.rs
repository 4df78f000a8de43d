//! The one place that decides what a plugin may use of the host: readiness, HTTP targets and
//! operator actions, as its manifest's `[capabilities]` grant them; denied by default.

use url::Url;

use crate::permissions::Grants;
use crate::wit::latest::HostError;

/// Why a plugin may not do what it asked. Each message names the plugin, the capability
/// and the manifest line that grants it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GrantError {
    #[error(
        "plugin `{plugin}` may not change readiness: add `readiness = true` under \
         [capabilities] in its manifest"
    )]
    Readiness { plugin: String },
    #[error(
        "plugin `{plugin}` may not send HTTP requests to {authority}: add \"{authority}\" to \
         [capabilities] http in {plugin}.toml"
    )]
    Http { plugin: String, authority: String },
    #[error(
        "plugin `{plugin}` may not run action `{action}`: add \"{action}\" to \
         [capabilities] actions in {plugin}.toml"
    )]
    Action { plugin: String, action: String },
    #[error(
        "plugin `{plugin}` may not ask for access tokens for `{resource}`: add \"{resource}\" to \
         [capabilities] azure-identity in {plugin}.toml"
    )]
    Identity { plugin: String, resource: String },
    /// The URL cannot be judged at all: not absolute, not http(s), no host.
    #[error("{0}")]
    UnusableUrl(String),
}

impl From<GrantError> for HostError {
    fn from(error: GrantError) -> HostError {
        match error {
            GrantError::UnusableUrl(text) => HostError::Invalid(text),
            refused => HostError::NotGranted(refused.to_string()),
        }
    }
}

/// Answers one plugin's capability requests from its grants.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CapabilityGranter<'a> {
    plugin: &'a str,
    grants: &'a Grants,
}

impl<'a> CapabilityGranter<'a> {
    /// The granter of `plugin`, holding `grants`.
    pub(crate) fn new(plugin: &'a str, grants: &'a Grants) -> Self {
        CapabilityGranter { plugin, grants }
    }

    /// Ok when the plugin may call `set-ready`.
    pub(crate) fn grant_readiness(&self) -> Result<(), GrantError> {
        if self.grants.readiness {
            return Ok(());
        }
        Err(GrantError::Readiness {
            plugin: self.plugin.to_owned(),
        })
    }

    /// The parsed `url` when its `host:port` is granted (host compared without regard to
    /// case, port exact; the port defaults to 80 for http, 443 for https).
    pub(crate) fn grant_http(&self, url: &str) -> Result<Url, GrantError> {
        let parsed = parse_http_url(url)?;
        let authority = authority_of(&parsed)
            .ok_or_else(|| GrantError::UnusableUrl(format!("`{url}` names no host")))?;
        let granted = self
            .grants
            .http
            .iter()
            .any(|entry| entry.trim().eq_ignore_ascii_case(&authority));
        if granted {
            return Ok(parsed);
        }
        Err(GrantError::Http {
            plugin: self.plugin.to_owned(),
            authority,
        })
    }

    /// Ok when the plugin may run the operator action `name` (whether the daemon defines
    /// it is the action runner's question).
    pub(crate) fn grant_action(&self, name: &str) -> Result<(), GrantError> {
        if self.grants.actions.iter().any(|grant| grant == name) {
            return Ok(());
        }
        Err(GrantError::Action {
            plugin: self.plugin.to_owned(),
            action: name.to_owned(),
        })
    }
}

impl<'a> CapabilityGranter<'a> {
    /// Ok when the plugin may ask for a managed-identity token for `resource`. Resources
    /// compare without regard to case or a trailing slash, as Azure's audiences do.
    /// Returns the manifest's spelling of the resource, the one tokens are fetched and cached
    /// under, so a plugin cannot multiply fetches by respelling it.
    pub(crate) fn grant_identity(&self, resource: &str) -> Result<&'a str, GrantError> {
        let wanted = audience(resource);
        let granted = self
            .grants
            .azure_identity
            .iter()
            .find(|entry| audience(entry).eq_ignore_ascii_case(wanted));
        if let Some(entry) = granted
            && !wanted.is_empty()
        {
            return Ok(entry.as_str());
        }
        Err(GrantError::Identity {
            plugin: self.plugin.to_owned(),
            resource: resource.to_owned(),
        })
    }
}

/// A resource without surrounding blanks and trailing slashes.
fn audience(resource: &str) -> &str {
    resource.trim().trim_end_matches('/')
}

/// `url` parsed, when it is an absolute `http://` or `https://` URL.
fn parse_http_url(url: &str) -> Result<Url, GrantError> {
    let parsed = Url::parse(url).map_err(|error| {
        GrantError::UnusableUrl(format!("`{url}` is not an absolute URL: {error}"))
    })?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(GrantError::UnusableUrl(format!(
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

    /// How a request came out: granted, refused (with a text the message must hold), or
    /// unusable (a URL that cannot be judged).
    #[derive(Debug)]
    enum Expected {
        Granted,
        Refused(&'static str),
        Unusable,
    }

    fn grants(readiness: bool, http: &[&str], actions: &[&str]) -> Grants {
        Grants {
            readiness,
            http: http.iter().map(|entry| (*entry).to_owned()).collect(),
            actions: actions.iter().map(|entry| (*entry).to_owned()).collect(),
            ..Grants::default()
        }
    }

    fn check<T>(result: Result<T, GrantError>, expected: &Expected, row: &str) {
        match (result, expected) {
            (Ok(_), Expected::Granted) => {}
            (Err(GrantError::UnusableUrl(_)), Expected::Unusable) => {}
            (Err(error), Expected::Refused(text)) => {
                assert!(
                    !matches!(error, GrantError::UnusableUrl(_)),
                    "{row}: {error}"
                );
                assert!(error.to_string().contains(text), "{row}: {error}");
            }
            (result, expected) => {
                panic!("{row}: expected {expected:?}, got {:?}", result.err())
            }
        }
    }

    /// Checks every `(grants, request, expected)` row through `ask`.
    fn check_rows<T>(
        rows: &[(&Grants, &str, Expected)],
        ask: impl Fn(CapabilityGranter<'_>, &str) -> Result<T, GrantError>,
    ) {
        for (grants, request, expected) in rows {
            check(
                ask(CapabilityGranter::new("p", grants), request),
                expected,
                request,
            );
        }
    }

    #[test]
    fn readiness_is_granted_only_by_the_manifest_flag() {
        let granted = grants(true, &[], &[]);
        let everything_else = grants(false, &["127.0.0.1:80"], &["stop-app"]);
        let rows = [
            (&granted, "set-ready", Expected::Granted),
            (
                &everything_else,
                "set-ready",
                Expected::Refused(
                    "plugin `p` may not change readiness: add `readiness = true` under \
                     [capabilities] in its manifest",
                ),
            ),
        ];
        check_rows(&rows, |granter, _| granter.grant_readiness());
    }

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
            (&list, "not a url", Expected::Unusable),
            (&list, "/relative", Expected::Unusable),
            (&list, "ftp://127.0.0.1/", Expected::Unusable),
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
            (&list, "wss://127.0.0.1:8080/", Expected::Unusable),
            (&list, "file:///etc/passwd", Expected::Unusable),
        ];
        check_rows(&rows, |granter, url| granter.grant_http(url));
    }

    #[test]
    fn actions_are_granted_by_name() {
        let granted = grants(true, &["127.0.0.1:80"], &["stop-app", "start-app"]);
        let rows = [
            (&granted, "stop-app", Expected::Granted),
            (&granted, "start-app", Expected::Granted),
            (
                &granted,
                "reboot-now",
                Expected::Refused(
                    "plugin `p` may not run action `reboot-now`: add \"reboot-now\" to \
                     [capabilities] actions in p.toml",
                ),
            ),
            (&granted, "Stop-App", Expected::Refused("Stop-App")),
        ];
        check_rows(&rows, |granter, action| granter.grant_action(action));
    }

    #[test]
    fn a_refusal_reaches_the_plugin_as_not_granted() {
        let none = Grants::default();
        let refused = CapabilityGranter::new("p", &none).grant_readiness();
        let error = HostError::from(refused.unwrap_err());
        assert!(matches!(error, HostError::NotGranted(_)), "{error:?}");
        let unusable = CapabilityGranter::new("p", &none).grant_http("/relative");
        let error = HostError::from(unusable.unwrap_err());
        assert!(matches!(error, HostError::Invalid(_)), "{error:?}");
    }

    #[test]
    fn identity_tokens_are_granted_per_resource_without_regard_to_a_trailing_slash() {
        let storage = Grants {
            azure_identity: vec!["https://storage.azure.com/".to_owned()],
            ..Grants::default()
        };
        let nothing = grants(true, &["127.0.0.1:80"], &["stop-app"]);
        let rows = [
            (&storage, "https://storage.azure.com/", Expected::Granted),
            (&storage, "https://storage.azure.com", Expected::Granted),
            (&storage, "https://STORAGE.azure.com/", Expected::Granted),
            (
                &storage,
                "https://vault.azure.net",
                Expected::Refused(
                    "plugin `p` may not ask for access tokens for `https://vault.azure.net`: \
                     add \"https://vault.azure.net\" to [capabilities] azure-identity in p.toml",
                ),
            ),
            (&storage, "", Expected::Refused("azure-identity")),
            (
                &nothing,
                "https://storage.azure.com/",
                Expected::Refused(""),
            ),
        ];
        check_rows(&rows, |granter, resource| {
            granter.grant_identity(resource).map(str::to_owned)
        });
        let granter = CapabilityGranter::new("p", &storage);
        for spelling in ["https://storage.azure.com//", "HTTPS://Storage.Azure.com"] {
            assert_eq!(
                granter.grant_identity(spelling),
                Ok("https://storage.azure.com/"),
                "tokens are fetched under the manifest's spelling"
            );
        }
    }
}

//! What forewarn tells a registry who it is: credentials from the environment or docker's
//! config, and the parameters of the challenge a registry answers 401 with.

use std::path::PathBuf;

use base64::Engine as _;

/// Registry user name and password (or token).
#[derive(Clone)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password or access token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials {{ username: {:?}, password: <hidden> }}",
            self.username
        )
    }
}

impl Credentials {
    /// `FOREWARN_REGISTRY_USER` and `FOREWARN_REGISTRY_PASSWORD`, else the `auths` entry of
    /// `registry` in docker's config (`$DOCKER_CONFIG/config.json`, `~/.docker/config.json`;
    /// credential helpers are not run).
    pub fn find(registry: &str) -> Option<Credentials> {
        Credentials::find_with_origin(registry).map(|(credentials, _)| credentials)
    }

    /// [`Credentials::find`], with where they were found, as a message names it.
    pub(crate) fn find_with_origin(registry: &str) -> Option<(Credentials, String)> {
        if let (Ok(username), Ok(password)) = (
            std::env::var(USER_VARIABLE),
            std::env::var(PASSWORD_VARIABLE),
        ) {
            let origin = format!("{USER_VARIABLE} and {PASSWORD_VARIABLE}");
            return Some((Credentials { username, password }, origin));
        }
        let config = match std::env::var_os("DOCKER_CONFIG") {
            Some(dir) => PathBuf::from(dir).join("config.json"),
            None => PathBuf::from(std::env::var_os("HOME")?).join(".docker/config.json"),
        };
        let text = std::fs::read_to_string(&config).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        let auth = json["auths"][registry]["auth"].as_str()?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth)
            .ok()?;
        let (username, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        let credentials = Credentials {
            username: username.to_owned(),
            password: password.to_owned(),
        };
        Some((
            credentials,
            format!("docker's config ({})", config.display()),
        ))
    }

    pub(crate) fn basic(&self) -> String {
        let pair = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

/// The variable holding the registry user name.
pub const USER_VARIABLE: &str = "FOREWARN_REGISTRY_USER";
/// The variable holding the registry password or access token.
pub const PASSWORD_VARIABLE: &str = "FOREWARN_REGISTRY_PASSWORD";

/// What to do about a 401 or 403 from `registry`, given where the credentials sent came
/// from (`None`: none were sent): each names the variables that set them.
pub(crate) fn refusal_fix(forbidden: bool, registry: &str, origin: Option<&str>) -> String {
    let set = format!(
        "set {USER_VARIABLE} and {PASSWORD_VARIABLE} (a password or an access token), or          `docker login {registry}`"
    );
    match (forbidden, origin) {
        (false, None) => format!("The registry needs credentials and none were found: {set}"),
        (false, Some(origin)) => {
            format!("The registry refused the credentials from {origin}: check them, or {set}")
        }
        (true, None) => format!(
            "The registry does not let an anonymous client do this and no credentials were              found: {set} for a user who may"
        ),
        (true, Some(origin)) => format!(
            "The user of the credentials from {origin} may not do this in that repository:              ask the registry's operator for access, or {set} for a user who may"
        ),
    }
}

/// `key="value"` pairs of a `WWW-Authenticate` challenge.
pub(crate) fn challenge_parameters(challenge: &str) -> Vec<(String, String)> {
    let rest = challenge
        .split_once(' ')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut remaining = rest.trim();
    while let Some((key, after)) = remaining.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((value, next)) => (value.to_owned(), next),
                None => (quoted.to_owned(), ""),
            },
            None => match after.split_once(',') {
                Some((value, next)) => (value.trim().to_owned(), next),
                None => (after.trim().to_owned(), ""),
            },
        };
        out.push((key, value));
        remaining = next.trim_start_matches(',').trim();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_are_read_with_quoted_commas() {
        let parameters = challenge_parameters(
            "Bearer realm=\"https://auth.example/token\",service=\"registry.example\",scope=\"repository:a/b:pull,push\"",
        );
        assert_eq!(
            parameters,
            [
                ("realm".to_owned(), "https://auth.example/token".to_owned()),
                ("service".to_owned(), "registry.example".to_owned()),
                ("scope".to_owned(), "repository:a/b:pull,push".to_owned()),
            ]
        );
    }
}

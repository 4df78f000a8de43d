//! Names of things in a registry: an OCI reference (`registry/repository:tag` or
//! `…@sha256:…`) and a content digest (`sha256:` and 64 hex digits) that checks bytes.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// A digest or a reference that cannot be read: the text, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Not `sha256:` and 64 lower-case hex digits.
    #[error("\"{text}\" is not a sha256 digest ({why})")]
    NotADigest {
        /// The text given.
        text: String,
        /// What a digest is.
        why: &'static str,
    },
    /// Not `REGISTRY/REPOSITORY[:TAG][@DIGEST]`.
    #[error(
        "\"{text}\" is not an OCI reference: {why}; write REGISTRY/REPOSITORY:TAG, e.g. \
         \"registry.example.com/acme/lb-drain:1.2.0\""
    )]
    NotAReference {
        /// The text given.
        text: String,
        /// Which part is wrong.
        why: String,
    },
}

/// A content digest, always `sha256:` + 64 lower-case hex digits (the only algorithm the
/// OCI spec requires registries to support; forewarn accepts no other).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// Parses `sha256:<64 hex>`; any other algorithm or form is refused with the reason.
    pub fn parse(text: &str) -> Result<Digest, NameError> {
        let not_a_digest = |why| NameError::NotADigest {
            text: text.to_owned(),
            why,
        };
        let Some(hex_part) = text.strip_prefix("sha256:") else {
            return Err(not_a_digest(
                "forewarn accepts only `sha256:` + 64 hex digits",
            ));
        };
        let well_formed = hex_part.len() == 64
            && hex_part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed {
            return Err(not_a_digest("`sha256:` + 64 lower-case hex digits"));
        }
        Ok(Digest(text.to_owned()))
    }

    /// `sha256:…` as written in manifests.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits (a blob's file name in an OCI layout).
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// The tag cosign-style tools keep a signature of this digest under: `sha256-<hex>.sig`.
    pub fn signature_tag(&self) -> String {
        format!("sha256-{}.sig", self.hex())
    }

    /// The first 12 hex digits, for tables.
    pub fn short(&self) -> &str {
        &self.hex()[..12]
    }

    /// Whether `bytes` hash to this digest.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        Digest::of(bytes) == *self
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a reference points at in its repository: a tag, or an exact digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A tag (`1.2.0`, `latest`): resolved to a digest when fetched.
    Tag(String),
    /// An exact manifest digest; a tag written beside it is kept for display only.
    Digest {
        /// The manifest digest.
        digest: Digest,
        /// A tag written before the `@`, if any (`repo:1.2@sha256:…`).
        tag: Option<String>,
    },
}

/// `registry[:port]/repository[:tag][@sha256:…]`, e.g. `ghcr.io/acme/lb-drain:1.2.0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]`.
    pub registry: String,
    /// The repository path, e.g. `acme/lb-drain`.
    pub repository: String,
    /// The tag or digest.
    pub target: Target,
}

impl Reference {
    /// Parses a reference. A registry is required (forewarn has no default registry, so a
    /// name never silently means Docker Hub); a missing tag means `latest`.
    pub fn parse(text: &str) -> Result<Reference, NameError> {
        let problem = |why: &str| NameError::NotAReference {
            text: text.to_owned(),
            why: why.to_owned(),
        };
        let (registry, rest) = text
            .split_once('/')
            .ok_or_else(|| problem("it names no registry"))?;
        let registry_like =
            registry.contains('.') || registry.contains(':') || registry == "localhost";
        if !registry_like || registry.is_empty() {
            return Err(problem(
                "the part before the first `/` must be a registry host",
            ));
        }
        let (name_and_tag, digest) = match rest.split_once('@') {
            Some((name, digest)) => (
                name,
                Some(Digest::parse(digest).map_err(|e| problem(&e.to_string()))?),
            ),
            None => (rest, None),
        };
        let (repository, tag) = match name_and_tag.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag.to_owned())),
            _ => (name_and_tag, None),
        };
        if repository.is_empty() || !repository.split('/').all(valid_path_component) {
            return Err(problem(
                "the repository must be lower-case path components of a-z, 0-9, `.`, `_` and `-`",
            ));
        }
        if let Some(tag) = &tag
            && !valid_tag(tag)
        {
            return Err(problem(
                "a tag is 1 to 128 of A-Z, a-z, 0-9, `.`, `_` and `-`",
            ));
        }
        let target = match digest {
            Some(digest) => Target::Digest { digest, tag },
            None => Target::Tag(tag.unwrap_or_else(|| "latest".to_owned())),
        };
        Ok(Reference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            target,
        })
    }

    /// The same repository at `digest` (the tag, if any, kept for display).
    pub fn at_digest(&self, digest: &Digest) -> Reference {
        let tag = match &self.target {
            Target::Tag(tag) => Some(tag.clone()),
            Target::Digest { tag, .. } => tag.clone(),
        };
        Reference {
            target: Target::Digest {
                digest: digest.clone(),
                tag,
            },
            ..self.clone()
        }
    }

    /// The tag or digest as it goes into `/v2/<name>/manifests/<reference>`.
    pub fn manifest_reference(&self) -> String {
        match &self.target {
            Target::Tag(tag) => tag.clone(),
            Target::Digest { digest, .. } => digest.to_string(),
        }
    }

    /// The tag, if the reference has one.
    pub fn tag(&self) -> Option<&str> {
        match &self.target {
            Target::Tag(tag) => Some(tag),
            Target::Digest { tag, .. } => tag.as_deref(),
        }
    }

    /// The last component of the repository (`lb-drain` of `acme/lb-drain`).
    pub fn last_component(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        match &self.target {
            Target::Tag(tag) => write!(f, ":{tag}"),
            Target::Digest { digest, tag } => {
                if let Some(tag) = tag {
                    write!(f, ":{tag}")?;
                }
                write!(f, "@{digest}")
            }
        }
    }
}

fn valid_path_component(component: &str) -> bool {
    !component.is_empty()
        && component.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
        && component
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

fn valid_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_with_tags_digests_and_ports() {
        let reference = Reference::parse("127.0.0.1:5000/acme/lb-drain:1.2.0").unwrap();
        assert_eq!(reference.registry, "127.0.0.1:5000");
        assert_eq!(reference.repository, "acme/lb-drain");
        assert_eq!(reference.target, Target::Tag("1.2.0".into()));
        assert_eq!(reference.last_component(), "lb-drain");
        let latest = Reference::parse("registry.example.com/x").unwrap();
        assert_eq!(latest.target, Target::Tag("latest".into()));
        let digest = Digest::of(b"x");
        let pinned = Reference::parse(&format!("localhost/x:1@{digest}")).unwrap();
        assert_eq!(pinned.manifest_reference(), digest.to_string());
        assert_eq!(pinned.tag(), Some("1"));
        assert_eq!(pinned.to_string(), format!("localhost/x:1@{digest}"));
    }

    #[test]
    fn bad_references_say_what_a_reference_looks_like() {
        for text in [
            "lb-drain",
            "acme/lb-drain:1",
            "host.example/Upper",
            "host.example/x:a/b",
            "host.example/x@md5:00",
        ] {
            let error = Reference::parse(text).unwrap_err().to_string();
            assert!(error.contains("REGISTRY/REPOSITORY:TAG"), "{text}: {error}");
        }
    }

    #[test]
    fn digests_check_bytes_and_refuse_other_algorithms() {
        let digest = Digest::of(b"hello");
        assert!(digest.matches(b"hello"));
        assert!(!digest.matches(b"hello!"));
        assert_eq!(Digest::parse(digest.as_str()).unwrap(), digest);
        assert!(Digest::parse("sha512:00").is_err());
        assert!(Digest::parse("sha256:ABCD").is_err());
        assert_eq!(
            digest.signature_tag(),
            format!("sha256-{}.sig", digest.hex())
        );
    }
}

//! The version of a plugin's WIT contract, as its export name `forewarn:plugin/handler@x.y.z`
//! says it, and which host bindings may serve it.

use std::fmt;

/// A `major.minor.patch` contract version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct WitVersion {
    major: u32,
    minor: u32,
    patch: u32,
}

impl WitVersion {
    /// The version `major.minor.patch`.
    pub(crate) const fn new(major: u32, minor: u32, patch: u32) -> Self {
        WitVersion {
            major,
            minor,
            patch,
        }
    }

    /// Parses `x.y.z`; None for anything else (pre-release and build suffixes included).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|part| part.parse::<u32>().ok());
        let (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some(WitVersion::new(major, minor, patch))
    }

    /// Whether bindings made for `self` serve a plugin built against `plugin`: the same
    /// major version (and minor, below 1.0), and not older than `self`.
    pub(crate) fn serves(self, plugin: WitVersion) -> bool {
        let compatible = if self.major == 0 {
            plugin.major == 0 && plugin.minor == self.minor
        } else {
            plugin.major == self.major
        };
        compatible && plugin >= self
    }
}

impl fmt::Display for WitVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::WitVersion;

    #[test]
    fn versions_parse_and_serve_semver_compatible_plugins() {
        let min = WitVersion::new(0, 1, 0);
        let rows = [
            ("0.1.0", Some(true)),
            ("0.1.7", Some(true)),
            ("0.2.0", Some(false)),
            ("1.1.0", Some(false)),
            ("0.1", None),
            ("0.1.0-rc1", None),
            ("0.1.0.0", None),
        ];
        for (text, serves) in rows {
            let parsed = WitVersion::parse(text);
            assert_eq!(parsed.map(|version| min.serves(version)), serves, "{text}");
        }
        assert!(WitVersion::new(1, 0, 0).serves(WitVersion::new(1, 4, 2)));
        assert_eq!(WitVersion::new(0, 1, 0).to_string(), "0.1.0");
    }
}

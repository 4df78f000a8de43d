//! How old an artifact is, from what its signed manifest says: the version annotation
//! (`org.opencontainers.image.version`, compared as dotted numbers with an optional
//! pre-release, as semver orders them) and, for the same or an unreadable version, when it
//! was made (`org.opencontainers.image.created`). An upgrade to an older artifact — a tag
//! re-pointed at an old signed manifest, a replay — is refused unless asked for.

use std::cmp::Ordering;

use crate::artifact::{ANNOTATION_CREATED, ANNOTATION_VERSION, ImageManifest};
use crate::lock::LockEntry;

/// What an artifact says of its age.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArtifactAge {
    /// Its version annotation.
    pub version: Option<String>,
    /// When it was made, RFC 3339.
    pub created: Option<String>,
}

/// Why an artifact is older than the one installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Downgrade {
    /// Its version is lower.
    LowerVersion,
    /// Its version is the same (or neither can be compared), and it was made earlier.
    MadeEarlier,
}

impl ArtifactAge {
    /// What the manifest's annotations say.
    pub fn of_manifest(manifest: &ImageManifest) -> ArtifactAge {
        ArtifactAge {
            version: manifest.annotations.get(ANNOTATION_VERSION).cloned(),
            created: manifest.annotations.get(ANNOTATION_CREATED).cloned(),
        }
    }

    /// What the lock recorded of an installed version.
    pub fn of_entry(entry: &LockEntry) -> ArtifactAge {
        ArtifactAge {
            version: entry.version.clone(),
            created: entry.created.clone(),
        }
    }

    /// How `self` is older than `installed`, if it is; none when it is as new or newer, or
    /// when nothing can be compared (a lock written before versions were recorded).
    pub fn older_than(&self, installed: &ArtifactAge) -> Option<Downgrade> {
        let versions = match (&self.version, &installed.version) {
            (Some(mine), Some(theirs)) => compare_versions(mine, theirs),
            _ => None,
        };
        match versions {
            Some(Ordering::Less) => return Some(Downgrade::LowerVersion),
            Some(Ordering::Greater) => return None,
            Some(Ordering::Equal) | None => {}
        }
        let made = |text: &Option<String>| {
            text.as_deref()
                .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
        };
        match (made(&self.created), made(&installed.created)) {
            (Some(mine), Some(theirs)) if mine < theirs => Some(Downgrade::MadeEarlier),
            _ => None,
        }
    }
}

/// `left` against `right` as versions ("1.10.0" > "1.9.2", "2.0.0-rc.1" < "2.0.0", a
/// leading `v` and `+build` ignored); none when either is not dotted numbers.
pub fn compare_versions(left: &str, right: &str) -> Option<Ordering> {
    let (left_core, left_pre) = parse(left)?;
    let (right_core, right_pre) = parse(right)?;
    let length = left_core.len().max(right_core.len());
    let part = |core: &[u64], index: usize| core.get(index).copied().unwrap_or(0);
    for index in 0..length {
        match part(&left_core, index).cmp(&part(&right_core, index)) {
            Ordering::Equal => {}
            other => return Some(other),
        }
    }
    Some(match (left_pre, right_pre) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(left), Some(right)) => compare_pre_releases(left, right),
    })
}

/// The numbers of a version and its pre-release, if it is one.
fn parse(text: &str) -> Option<(Vec<u64>, Option<&str>)> {
    let text = text.trim();
    let text = text.strip_prefix('v').unwrap_or(text);
    let text = text
        .split_once('+')
        .map_or(text, |(version, _build)| version);
    let (core, pre) = match text.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (text, None),
    };
    let numbers = core
        .split('.')
        .map(|part| part.parse::<u64>().ok())
        .collect::<Option<Vec<u64>>>()?;
    Some((numbers, pre))
}

/// Semver's order of pre-releases: identifier by identifier, numbers below words.
fn compare_pre_releases(left: &str, right: &str) -> Ordering {
    let mut left_parts = left.split('.');
    let mut right_parts = right.split('.');
    loop {
        match (left_parts.next(), right_parts.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(left), Some(right)) => {
                let order = match (left.parse::<u64>(), right.parse::<u64>()) {
                    (Ok(left), Ok(right)) => left.cmp(&right),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    (Err(_), Err(_)) => left.cmp(right),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(version: Option<&str>, created: Option<&str>) -> ArtifactAge {
        ArtifactAge {
            version: version.map(str::to_owned),
            created: created.map(str::to_owned),
        }
    }

    #[test]
    fn versions_compare_as_numbers_with_pre_releases_below_releases() {
        use Ordering::*;
        for (left, right, order) in [
            ("1.0.0", "3.0.0", Less),
            ("1.10.0", "1.9.2", Greater),
            ("v2.0", "2.0.0", Equal),
            ("2.0.0-rc.1", "2.0.0", Less),
            ("2.0.0-rc.2", "2.0.0-rc.10", Less),
            ("2.0.0-alpha", "2.0.0-1", Greater),
            ("1.2.3+build.7", "1.2.3", Equal),
        ] {
            assert_eq!(
                compare_versions(left, right),
                Some(order),
                "{left} / {right}"
            );
        }
        assert_eq!(compare_versions("latest", "1.0.0"), None);
    }

    #[test]
    fn an_older_version_or_the_same_version_made_earlier_is_a_downgrade() {
        let installed = age(Some("3.0.0"), Some("2026-03-01T00:00:00Z"));
        let made_later = Some("2026-04-01T00:00:00Z");
        assert_eq!(
            age(Some("1.0.0"), made_later).older_than(&installed),
            Some(Downgrade::LowerVersion),
            "a lower version is older whenever it was made"
        );
        assert_eq!(
            age(Some("3.0.0"), Some("2026-02-01T00:00:00Z")).older_than(&installed),
            Some(Downgrade::MadeEarlier)
        );
        assert_eq!(
            age(Some("latest"), Some("2026-02-01T00:00:00Z"))
                .older_than(&age(Some("latest"), Some("2026-03-01T00:00:00Z"))),
            Some(Downgrade::MadeEarlier),
            "the same tag-like version made earlier"
        );
        assert_eq!(age(Some("3.0.1"), None).older_than(&installed), None);
        assert_eq!(age(Some("3.0.0"), made_later).older_than(&installed), None);
        assert_eq!(
            age(Some("1.0.0"), None).older_than(&ArtifactAge::default()),
            None,
            "nothing recorded (a lock from before): nothing to compare"
        );
    }
}

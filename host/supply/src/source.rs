//! What `plugin install` and `plugin pull` were given: a registry reference, or a local OCI
//! image layout (a directory or a tarball of one), fetched the same checked way.

use std::path::{Path, PathBuf};

use crate::error::SupplyError;
use crate::fetch::{self, FetchLimits, Fetched};
use crate::layout::Layout;
use crate::reference::{Reference, Target};
use crate::registry::{RegistryClient, RegistryOptions};

/// Where a plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A registry.
    Registry(Reference),
    /// An OCI image layout: a directory or a `.tar` of one.
    Layout(PathBuf),
}

impl Source {
    /// A path that exists (or starts with `.` or `/`) is a layout; anything else a reference.
    pub fn parse(text: &str) -> Result<Source, SupplyError> {
        if text.starts_with('.') || text.starts_with('/') || Path::new(text).exists() {
            return Ok(Source::Layout(PathBuf::from(text)));
        }
        Ok(Source::Registry(Reference::parse(text)?))
    }

    /// The reference or path, as shown (escaped and cut).
    pub fn shown(&self) -> String {
        match self {
            Source::Registry(reference) => {
                forewarn_manifest::shown::reference(&reference.to_string())
            }
            Source::Layout(path) => {
                forewarn_manifest::shown::reference(&path.display().to_string())
            }
        }
    }

    /// The name to install under when neither `--as` nor the artifact gives one.
    pub fn fallback_name(&self) -> String {
        match self {
            Source::Registry(reference) => reference.last_component().to_owned(),
            Source::Layout(path) => path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }
}

/// A fetched artifact with what the lock records as its source.
pub struct FetchedFrom {
    /// The artifact.
    pub fetched: Fetched,
    /// `registry/repo:tag@sha256:…`, or `PATH@sha256:…`.
    pub source: String,
    /// The tag it was fetched by, if any.
    pub tag: Option<String>,
}

/// Fetches the plugin `source` names, all of it within `deadline` (`--timeout`): a registry
/// that answers a byte at a time, each within the read timeout, is stopped there too.
pub async fn fetch_within(
    source: &Source,
    options: &RegistryOptions,
    limits: FetchLimits,
    deadline: std::time::Duration,
) -> Result<FetchedFrom, SupplyError> {
    tokio::time::timeout(deadline, fetch(source, options, limits))
        .await
        .map_err(|_| SupplyError::TimedOut {
            what: format!("downloading {}", source.shown()),
            after: deadline,
            outcome: "nothing was installed and the plugin directory is unchanged",
        })?
}

/// Fetches the plugin `source` names.
pub async fn fetch(
    source: &Source,
    options: &RegistryOptions,
    limits: FetchLimits,
) -> Result<FetchedFrom, SupplyError> {
    match source {
        Source::Registry(reference) => {
            let client = RegistryClient::new(&reference.registry, &reference.repository, options)?;
            let pinned = match &reference.target {
                Target::Digest { digest, .. } => Some(digest),
                Target::Tag(_) => None,
            };
            let fetched = fetch::fetch(
                &client,
                &reference.to_string(),
                &reference.manifest_reference(),
                pinned,
                limits,
            )
            .await?;
            let source = reference.at_digest(&fetched.digest).to_string();
            Ok(FetchedFrom {
                fetched,
                source,
                tag: reference.tag().map(str::to_owned),
            })
        }
        Source::Layout(path) => {
            let total = limits
                .wasm
                .saturating_add(limits.manifest_toml)
                .saturating_add(8 << 20);
            let layout = Layout::open(path, total)?;
            let tag = layout.only_tag()?;
            let fetched = fetch::fetch(&layout, layout.name(), &tag, None, limits).await?;
            let source = format!("{}@{}", absolute(path).display(), fetched.digest);
            Ok(FetchedFrom {
                fetched,
                source,
                tag: Some(tag),
            })
        }
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

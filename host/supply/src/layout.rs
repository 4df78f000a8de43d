//! OCI image layouts (`oci-layout`, `index.json`, `blobs/sha256/…`): what `plugin pull --to
//! DIR` writes for an air-gapped machine, and what `plugin install DIR` (or a tarball of
//! one) reads, with the same digest checks as a registry.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::artifact::{Descriptor, MANIFEST_MEDIA_TYPE, MAX_OCI_MANIFEST_BYTES};
use crate::bounded_body::{Limit, check_blob};
use crate::error::SupplyError;
use crate::fetch::{Fetched, Store};
use crate::reference::Digest;
use crate::registry::ServedManifest;

/// The annotation that names a manifest in `index.json` (its tag).
const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Largest `index.json` read.
const MAX_INDEX_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    manifests: Vec<Descriptor>,
}

/// Where a layout's files are: a directory, or the entries of a tarball read into memory.
enum Files {
    Dir(PathBuf),
    Tar(BTreeMap<String, Vec<u8>>),
}

/// An OCI image layout to install from.
pub struct Layout {
    files: Files,
    index: Index,
    name: String,
}

impl Layout {
    /// Opens the layout in `path`: a directory, or a tarball of one (`.tar`). `max_bytes`
    /// caps a tarball's total size.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Layout, SupplyError> {
        let name = path.display().to_string();
        let metadata = std::fs::metadata(path).map_err(|source| {
            SupplyError::io(
                "open",
                path,
                source,
                "give a directory written by `forewarn plugin pull --to DIR`, or a tarball of one",
            )
        })?;
        let files = if metadata.is_dir() {
            Files::Dir(path.to_path_buf())
        } else {
            Files::Tar(read_tar(path, max_bytes)?)
        };
        let mut layout = Layout {
            files,
            index: Index {
                schema_version: 2,
                media_type: None,
                manifests: Vec::new(),
            },
            name,
        };
        let index = layout.read("index.json", MAX_INDEX_BYTES)?;
        layout.index = serde_json::from_slice(&index).map_err(|error| SupplyError::NotAPlugin {
            source_name: layout.name.clone(),
            problem: format!("its index.json is not an OCI image index: {error}"),
        })?;
        Ok(layout)
    }

    /// The tag of the one plugin manifest in the layout (signatures aside), for `install DIR`.
    pub fn only_tag(&self) -> Result<String, SupplyError> {
        let tags: Vec<String> = self
            .index
            .manifests
            .iter()
            .filter_map(|entry| entry.annotations.get(REF_NAME).cloned())
            .filter(|tag| !tag.ends_with(".sig"))
            .collect();
        match tags.as_slice() {
            [tag] => Ok(tag.clone()),
            [] => Err(SupplyError::NotAPlugin {
                source_name: self.name.clone(),
                problem: "its index.json names no manifest (org.opencontainers.image.ref.name)"
                    .into(),
            }),
            _ => Err(SupplyError::Usage(format!(
                "{} holds several plugins ({}); name one: {}:TAG",
                self.name,
                tags.join(", "),
                self.name
            ))),
        }
    }

    /// The layout's name (its path), for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn read(&self, relative: &str, max_bytes: u64) -> Result<Vec<u8>, SupplyError> {
        let too_large = |size| {
            SupplyError::TooLarge {
            what: format!("{relative} in {}", self.name),
            size,
            limit: max_bytes,
            fix: "Raise `max-plugin-size` or `max-manifest-size` in the config if the plugin is really this large".into(),
        }
        };
        match &self.files {
            Files::Tar(entries) => {
                let bytes = entries
                    .get(relative)
                    .ok_or_else(|| missing(&self.name, relative))?;
                if bytes.len() as u64 > max_bytes {
                    return Err(too_large(bytes.len() as u64));
                }
                Ok(bytes.clone())
            }
            Files::Dir(dir) => {
                let path = dir.join(relative);
                let file = std::fs::File::open(&path).map_err(|_| missing(&self.name, relative))?;
                let size = file.metadata().map(|metadata| metadata.len()).unwrap_or(0);
                if size > max_bytes {
                    return Err(too_large(size));
                }
                let mut bytes = Vec::new();
                file.take(max_bytes + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|source| {
                        SupplyError::io("read", &path, source, "check the layout's files")
                    })?;
                if bytes.len() as u64 > max_bytes {
                    return Err(too_large(bytes.len() as u64));
                }
                Ok(bytes)
            }
        }
    }
}

fn missing(layout: &str, relative: &str) -> SupplyError {
    SupplyError::NotAPlugin {
        source_name: layout.to_owned(),
        problem: format!(
            "it has no {relative}; copy the whole directory `forewarn plugin pull --to DIR` wrote"
        ),
    }
}

impl Store for Layout {
    async fn manifest(&self, reference: &str) -> Result<Option<ServedManifest>, SupplyError> {
        let entry = self.index.manifests.iter().find(|entry| {
            entry.digest == reference
                || entry.annotations.get(REF_NAME).map(String::as_str) == Some(reference)
        });
        let Some(entry) = entry else {
            return Ok(None);
        };
        let digest = Digest::parse(&entry.digest)?;
        let bytes = self.read(
            &format!("blobs/sha256/{}", digest.hex()),
            MAX_OCI_MANIFEST_BYTES,
        )?;
        check_blob(
            &bytes,
            entry,
            &digest,
            &format!("the manifest {reference} in {}", self.name),
        )?;
        Ok(Some(ServedManifest {
            bytes,
            digest_header: None,
        }))
    }

    async fn blob(
        &self,
        descriptor: &Descriptor,
        limit: &Limit,
        what: &str,
    ) -> Result<Vec<u8>, SupplyError> {
        let digest = Digest::parse(&descriptor.digest)?;
        limit.check(what, descriptor.size)?;
        let bytes = self.read(&format!("blobs/sha256/{}", digest.hex()), limit.bytes)?;
        check_blob(&bytes, descriptor, &digest, what)?;
        Ok(bytes)
    }
}

/// Reads a tarball's regular files into memory, at most `max_bytes` in all.
fn read_tar(path: &Path, max_bytes: u64) -> Result<BTreeMap<String, Vec<u8>>, SupplyError> {
    let unreadable = |problem: String| SupplyError::NotAPlugin {
        source_name: path.display().to_string(),
        problem: format!("it is not a readable tarball of an OCI layout: {problem}"),
    };
    let file = std::fs::File::open(path).map_err(|source| {
        SupplyError::io(
            "open",
            path,
            source,
            "give the path of the layout's tarball",
        )
    })?;
    let mut archive = tar::Archive::new(file);
    let mut entries = BTreeMap::new();
    let mut total = 0u64;
    for entry in archive
        .entries()
        .map_err(|error| unreadable(error.to_string()))?
    {
        let entry = entry.map_err(|error| unreadable(error.to_string()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .map_err(|error| unreadable(error.to_string()))?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_owned();
        total += entry.size();
        if total > max_bytes {
            return Err(SupplyError::TooLarge {
                what: format!("the tarball {}", path.display()),
                size: total,
                limit: max_bytes,
                fix: "Raise `max-plugin-size` in the config if the plugin is really this large"
                    .into(),
            });
        }
        let mut bytes = Vec::new();
        entry
            .take(max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| unreadable(error.to_string()))?;
        entries.insert(name, bytes);
    }
    Ok(entries)
}

/// Writes `fetched` (and its signatures) as an OCI image layout into `dir` (missing or
/// empty), the manifest tagged `tag`.
pub fn write(dir: &Path, fetched: &Fetched, tag: &str) -> Result<(), SupplyError> {
    let io = |action, path: &Path, source| {
        SupplyError::io(action, path, source, "choose a directory you may write")
    };
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|source| io("read", dir, source))?;
        if entries.next().is_some() {
            return Err(SupplyError::Usage(format!(
                "{} is not empty; pull into a new directory",
                dir.display()
            )));
        }
    }
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).map_err(|source| io("create", &blobs, source))?;
    let write_blob = |bytes: &[u8]| -> Result<(), SupplyError> {
        let path = blobs.join(Digest::of(bytes).hex());
        std::fs::write(&path, bytes).map_err(|source| io("write", &path, source))
    };
    write_blob(&fetched.manifest_bytes)?;
    write_blob(&fetched.config)?;
    for (_, bytes) in &fetched.layers {
        write_blob(bytes)?;
    }
    let mut manifests = vec![tagged(&fetched.manifest_bytes, tag)];
    if let Some(signatures) = &fetched.signatures {
        write_blob(&signatures.manifest_bytes)?;
        for (_, bytes) in &signatures.blobs {
            write_blob(bytes)?;
        }
        manifests.push(tagged(
            &signatures.manifest_bytes,
            &fetched.digest.signature_tag(),
        ));
    }
    let index = Index {
        schema_version: 2,
        media_type: Some("application/vnd.oci.image.index.v1+json".into()),
        manifests,
    };
    let index_path = dir.join("index.json");
    let index_bytes = serde_json::to_vec_pretty(&index).expect("the index serializes");
    std::fs::write(&index_path, index_bytes).map_err(|source| io("write", &index_path, source))?;
    let marker = dir.join("oci-layout");
    std::fs::write(&marker, br#"{"imageLayoutVersion":"1.0.0"}"#)
        .map_err(|source| io("write", &marker, source))
}

fn tagged(manifest: &[u8], tag: &str) -> Descriptor {
    let mut descriptor = Descriptor::of(MANIFEST_MEDIA_TYPE, manifest);
    descriptor.annotations.insert(REF_NAME.into(), tag.into());
    descriptor
}

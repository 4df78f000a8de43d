//! `forewarn plugin push`: checks the plugin as `plugin check` does, builds its artifact,
//! pushes the blobs and the manifest, and with a key signs the manifest digest and pushes
//! the signature under `sha256-<digest>.sig` (keeping signatures already there).

use std::path::{Path, PathBuf};

use crate::artifact::{self, Descriptor, ImageManifest, MANIFEST_MEDIA_TYPE, PluginParts};
use crate::component_check::check_component_async;
use crate::error::SupplyError;
use crate::reference::{Digest, Reference, Target};
use crate::registry::{RegistryClient, RegistryOptions};
use crate::signature;
use forewarn_manifest::GrantSummary;
use forewarn_manifest::PluginManifest;
use forewarn_manifest::name_problem;
use forewarn_pipeline::log_fields::rfc3339;

/// What to push.
pub struct PushRequest {
    /// The component.
    pub wasm: PathBuf,
    /// Its manifest; `None`: `NAME.toml` beside the component if present.
    pub manifest: Option<PathBuf>,
    /// Where to push (with a tag).
    pub reference: Reference,
    /// An OpenSSH private key to sign with.
    pub sign: Option<PathBuf>,
    /// The version annotation; default: the tag.
    pub version: Option<String>,
    /// How to reach the registry.
    pub registry: RegistryOptions,
    /// Largest component accepted (`max-plugin-size`).
    pub max_wasm_bytes: u64,
}

/// What was pushed.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The plugin's name.
    pub name: String,
    /// The artifact's manifest digest.
    pub digest: Digest,
    /// The signing key's fingerprint, when signed.
    pub signed: bool,
    /// What the manifest grants (also in the annotations).
    pub grants: GrantSummary,
}

/// Pushes (and signs) the plugin.
pub async fn push(request: PushRequest) -> Result<Pushed, SupplyError> {
    let Target::Tag(tag) = &request.reference.target else {
        return Err(SupplyError::Usage(format!(
            "{} names a digest; push to a tag (REGISTRY/REPOSITORY:TAG)",
            request.reference
        )));
    };
    let name = request
        .wasm
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(problem) = name_problem(&name) {
        return Err(SupplyError::Usage(format!(
            "{} cannot be a plugin's file name: {problem}; name it NAME.wasm with NAME of a-z, 0-9, '-', '_'",
            request.wasm.display()
        )));
    }
    let version = request.version.as_deref().unwrap_or(tag);
    if forewarn_manifest::shown::moves_text(version)
        || version.len() > forewarn_manifest::shown::VERSION_MAX_BYTES
    {
        return Err(SupplyError::Usage(format!(
            "--version \"{}\" is not a version: it holds a control character or is longer than \
             {} bytes; give a short one such as 1.2.0",
            forewarn_manifest::shown::version(version),
            forewarn_manifest::shown::VERSION_MAX_BYTES
        )));
    }
    let wasm = read_capped(&request.wasm, request.max_wasm_bytes)?;
    let manifest_path = request
        .manifest
        .clone()
        .or_else(|| Some(request.wasm.with_extension("toml")).filter(|path| path.is_file()));
    let (manifest, manifest_text) = match &manifest_path {
        Some(path) => {
            let manifest = PluginManifest::load(path)
                .map_err(|error| SupplyError::Check(error.to_string()))?;
            let text = std::fs::read(path).map_err(|source| {
                SupplyError::io("read", path, source, "check the --manifest path")
            })?;
            (manifest, Some(text))
        }
        None => (PluginManifest::default(), None),
    };
    let grants = GrantSummary::of(&manifest);
    let checked = check_component_async(&name, wasm.clone(), manifest).await?;
    let built = artifact::build_plugin_artifact(&PluginParts {
        name: &name,
        wasm: &wasm,
        manifest: manifest_text.as_deref(),
        grants: &grants,
        world: &checked.world,
        exports: checked.report.exports.clone(),
        imports: checked.report.imports.clone(),
        version: Some(version),
        created: rfc3339(std::time::SystemTime::now()),
    });
    let reference = &request.reference;
    let client = RegistryClient::new(
        &reference.registry,
        &reference.repository,
        &request.registry,
    )?;
    for (descriptor, bytes) in &built.blobs {
        client
            .push_blob(
                bytes,
                &format!(
                    "pushing {} ({})",
                    descriptor.media_type,
                    short(&descriptor.digest)
                ),
            )
            .await?;
    }
    client.push_manifest(tag, &built.manifest).await?;
    let digest = built.digest();
    let signed = match &request.sign {
        Some(key) => {
            push_signature(&client, &digest, built.manifest.len() as u64, key).await?;
            true
        }
        None => false,
    };
    Ok(Pushed {
        name,
        digest,
        signed,
        grants,
    })
}

/// Signs `digest` and pushes the signature artifact, keeping signatures already there.
async fn push_signature(
    client: &RegistryClient,
    digest: &Digest,
    manifest_size: u64,
    key: &Path,
) -> Result<(), SupplyError> {
    let armored = signature::sign(digest, key)?;
    let tag = digest.signature_tag();
    let existing = match client.manifest(&tag).await? {
        Some(served) => ImageManifest::parse(&served.bytes, "the existing signatures")
            .map(|manifest| manifest.layers)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let subject = Descriptor {
        media_type: MANIFEST_MEDIA_TYPE.into(),
        digest: digest.to_string(),
        size: manifest_size,
        annotations: Default::default(),
    };
    let built = artifact::build_signature_artifact(subject, existing, &armored);
    for (_, bytes) in &built.blobs {
        client.push_blob(bytes, "pushing the signature").await?;
    }
    client.push_manifest(&tag, &built.manifest).await
}

fn read_capped(path: &Path, max_bytes: u64) -> Result<Vec<u8>, SupplyError> {
    let bytes = std::fs::read(path).map_err(|source| {
        SupplyError::io("read", path, source, "give the path of the plugin's .wasm")
    })?;
    if bytes.len() as u64 > max_bytes {
        return Err(SupplyError::TooLarge {
            what: path.display().to_string(),
            size: bytes.len() as u64,
            limit: max_bytes,
            fix: "Raise `max-plugin-size` in the config if the plugin is really this large".into(),
        });
    }
    Ok(bytes)
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

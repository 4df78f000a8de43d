//! Fetching a plugin artifact, whole and checked, from a registry or an OCI image layout:
//! the manifest (resolved from a tag and checked against a pinned digest), its config and
//! layers (each under its size limit, each checked against its digest), and the signatures
//! kept under its `sha256-<digest>.sig` tag. Nothing is written anywhere.

use crate::artifact::{
    self, Descriptor, ImageManifest, LayerKind, MAX_CONFIG_BYTES, MAX_SIGNATURE_BYTES,
    MAX_SIGNATURES, SIGNATURE_MEDIA_TYPE,
};
use crate::bounded_body::Limit;
use crate::error::SupplyError;
use crate::reference::Digest;
use crate::registry::{RegistryClient, ServedManifest};

/// Where manifests and blobs come from: a registry or an OCI image layout.
pub trait Store {
    /// The manifest at `reference` (a tag or a digest); `None` if there is none.
    fn manifest(
        &self,
        reference: &str,
    ) -> impl Future<Output = Result<Option<ServedManifest>, SupplyError>>;
    /// The blob `descriptor` names, checked against its size and digest, under `limit`.
    fn blob(
        &self,
        descriptor: &Descriptor,
        limit: &Limit,
        what: &str,
    ) -> impl Future<Output = Result<Vec<u8>, SupplyError>>;
}

impl Store for RegistryClient {
    async fn manifest(&self, reference: &str) -> Result<Option<ServedManifest>, SupplyError> {
        RegistryClient::manifest(self, reference).await
    }

    async fn blob(
        &self,
        descriptor: &Descriptor,
        limit: &Limit,
        what: &str,
    ) -> Result<Vec<u8>, SupplyError> {
        RegistryClient::blob(self, descriptor, limit, what).await
    }
}

/// The size limits of a plugin's files (`max-plugin-size`, `max-manifest-size`).
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    /// Largest component.
    pub wasm: u64,
    /// Largest `NAME.toml`.
    pub manifest_toml: u64,
}

/// A plugin artifact as fetched: every byte checked against its digest.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The reference or path, for messages.
    pub source_name: String,
    /// The manifest's digest.
    pub digest: Digest,
    /// The manifest's bytes.
    pub manifest_bytes: Vec<u8>,
    /// The parsed manifest.
    pub manifest: ImageManifest,
    /// The config blob.
    pub config: Vec<u8>,
    /// The layers, in order.
    pub layers: Vec<(Descriptor, Vec<u8>)>,
    /// The signature artifact, if there is one.
    pub signatures: Option<FetchedSignatures>,
}

/// The signature artifact of a plugin artifact.
#[derive(Debug, Clone)]
pub struct FetchedSignatures {
    /// Its manifest's bytes.
    pub manifest_bytes: Vec<u8>,
    /// Its config and signature blobs.
    pub blobs: Vec<(Descriptor, Vec<u8>)>,
    /// The armored signatures.
    pub armored: Vec<Vec<u8>>,
}

impl Fetched {
    /// The armored signatures (none when unsigned).
    pub fn signatures(&self) -> Vec<Vec<u8>> {
        self.signatures
            .as_ref()
            .map(|signatures| signatures.armored.clone())
            .unwrap_or_default()
    }

    /// The bytes of the layer of `kind`, if the artifact has one.
    pub fn layer(&self, kind: LayerKind) -> Option<&[u8]> {
        self.layers
            .iter()
            .find(|(layer, _)| LayerKind::of(layer) == Ok(kind))
            .map(|(_, bytes)| bytes.as_slice())
    }
}

/// Fetches the plugin artifact at `reference` from `store`; `pinned` is the digest the
/// reference named, if it named one.
pub async fn fetch(
    store: &impl Store,
    source_name: &str,
    reference: &str,
    pinned: Option<&Digest>,
    limits: FetchLimits,
) -> Result<Fetched, SupplyError> {
    let served = store
        .manifest(reference)
        .await?
        .ok_or_else(|| SupplyError::Status {
            what: format!("fetching {source_name}"),
            status: 404,
            detail: ": no such manifest".into(),
            fix: "Check the repository and the tag".into(),
        })?;
    let digest = Digest::of(&served.bytes);
    let claimed = pinned
        .map(Digest::to_string)
        .or(served.digest_header.clone());
    if let Some(expected) = claimed
        && expected != digest.as_str()
    {
        return Err(SupplyError::DigestMismatch {
            what: format!("the manifest of {source_name}"),
            expected,
            actual: digest.to_string(),
        });
    }
    let manifest = ImageManifest::parse(&served.bytes, source_name)?;
    artifact::check_plugin_shape(&manifest, source_name)?;
    artifact::check_annotations(&manifest, source_name)?;
    let signatures = fetch_signatures(store, source_name, &digest).await?;
    let config_limit = Limit {
        bytes: MAX_CONFIG_BYTES,
        fix: "A Wasm artifact's config is small; this is not one".into(),
    };
    let config = store
        .blob(
            &manifest.config,
            &config_limit,
            &format!("the config of {source_name}"),
        )
        .await?;
    let mut layers = Vec::new();
    for layer in &manifest.layers {
        let (limit, what) = match LayerKind::of(layer) {
            Ok(LayerKind::Component) => (
                Limit {
                    bytes: limits.wasm,
                    fix: "Raise `max-plugin-size` in the config if the plugin is really this large".into(),
                },
                format!("the component layer of {source_name}"),
            ),
            _ => (
                Limit {
                    bytes: limits.manifest_toml,
                    fix: "Raise `max-manifest-size` in the config if the manifest is really this large".into(),
                },
                format!("the manifest layer of {source_name}"),
            ),
        };
        let bytes = store.blob(layer, &limit, &what).await?;
        layers.push((layer.clone(), bytes));
    }
    Ok(Fetched {
        source_name: source_name.to_owned(),
        digest,
        manifest_bytes: served.bytes,
        manifest,
        config,
        layers,
        signatures,
    })
}

/// The signature artifact under `sha256-<digest>.sig`, if any.
async fn fetch_signatures(
    store: &impl Store,
    source_name: &str,
    digest: &Digest,
) -> Result<Option<FetchedSignatures>, SupplyError> {
    let Some(served) = store.manifest(&digest.signature_tag()).await? else {
        return Ok(None);
    };
    let what = format!("the signatures of {source_name}");
    let manifest = ImageManifest::parse(&served.bytes, &what)?;
    let limit = Limit {
        bytes: MAX_SIGNATURE_BYTES,
        fix: "An OpenSSH signature is a few hundred bytes; this is not one".into(),
    };
    let mut blobs = Vec::new();
    let mut armored = Vec::new();
    let signature_layers = manifest
        .layers
        .iter()
        .filter(|layer| layer.media_type == SIGNATURE_MEDIA_TYPE)
        .take(MAX_SIGNATURES);
    for layer in signature_layers {
        let bytes = store.blob(layer, &limit, &what).await?;
        armored.push(bytes.clone());
        blobs.push((layer.clone(), bytes));
    }
    if manifest.config.size <= MAX_CONFIG_BYTES {
        let config_limit = Limit {
            bytes: MAX_CONFIG_BYTES,
            fix: String::new(),
        };
        if let Ok(config) = store.blob(&manifest.config, &config_limit, &what).await {
            blobs.insert(0, (manifest.config.clone(), config));
        }
    }
    Ok(Some(FetchedSignatures {
        manifest_bytes: served.bytes,
        blobs,
        armored,
    }))
}

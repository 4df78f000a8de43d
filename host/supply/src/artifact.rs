//! The shape of a plugin in a registry: the CNCF "Wasm OCI artifact" layout (config
//! `application/vnd.wasm.config.v0+json`, the component as an `application/wasm` layer) with
//! the plugin's `NAME.toml` as a second layer of its own media type, and the plugin's name,
//! WIT world, version and requested grants as annotations. Also the signature artifact kept
//! under the `sha256-<digest>.sig` tag.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::SupplyError;
use crate::reference::Digest;
use forewarn_manifest::GrantSummary;

/// An OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// An OCI image index (several manifests): not a plugin.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The Wasm OCI artifact's config.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The Wasm OCI artifact's component layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The plugin's manifest (`NAME.toml`) as a layer.
pub const PLUGIN_MANIFEST_MEDIA_TYPE: &str = "application/vnd.forewarn.plugin.manifest.v1+toml";
/// The OCI "empty" config of artifacts that need none (the signature's).
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// An OpenSSH signature (`ssh-keygen -Y sign` output) as a layer, and the signature
/// artifact's type.
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.forewarn.signature.v1+sshsig";
/// The empty config's content.
pub const EMPTY_CONFIG: &[u8] = b"{}";

/// The plugin's name (its file name in the plugin directory).
pub const ANNOTATION_NAME: &str = "dev.forewarn.plugin.name";
/// The WIT world the component implements, e.g. `forewarn:plugin/event-handler@0.2.0`.
pub const ANNOTATION_WORLD: &str = "dev.forewarn.plugin.world";
/// What the manifest layer grants ([`GrantSummary`] as JSON): what a registry shows.
pub const ANNOTATION_GRANTS: &str = "dev.forewarn.plugin.grants";
/// The digest a signature layer signs.
pub const ANNOTATION_SIGNED_DIGEST: &str = "dev.forewarn.signature.digest";
/// The OCI standard annotations used.
pub const ANNOTATION_VERSION: &str = "org.opencontainers.image.version";
/// When the artifact was made.
pub const ANNOTATION_CREATED: &str = "org.opencontainers.image.created";
/// A file name for the layer (what OCI tools name it on disk).
pub const ANNOTATION_TITLE: &str = "org.opencontainers.image.title";

/// Largest OCI manifest accepted (ours are under 2 KiB; registries accept 4 MiB).
pub const MAX_OCI_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Largest config blob accepted.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// Largest signature accepted (an ed25519 sshsig is about 300 bytes).
pub const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;
/// Most signatures read for one artifact.
pub const MAX_SIGNATURES: usize = 16;
/// Largest annotation (key and value) accepted: a version is a few bytes, the grants a few
/// hundred; a 900 KiB "version" is an attempt to fill a terminal.
pub const MAX_ANNOTATION_BYTES: usize = 8 * 1024;

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The media type of what it points at.
    pub media_type: String,
    /// Its digest.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Annotations, if any.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// The descriptor of `bytes` as `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_owned(),
            digest: Digest::of(bytes).to_string(),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }

    /// Its digest, checked for form.
    pub fn parsed_digest(&self) -> Result<Digest, crate::reference::NameError> {
        Digest::parse(&self.digest)
    }
}

/// An OCI image manifest (the fields forewarn reads or writes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`] (optional in the spec, always written by forewarn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The artifact's type (OCI 1.1), for the signature artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// What a signature artifact is about (an OCI 1.1 referrer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl ImageManifest {
    /// Parses manifest bytes, refusing an index (several platforms) or another schema.
    pub fn parse(bytes: &[u8], source_name: &str) -> Result<ImageManifest, SupplyError> {
        let not_a_plugin = |problem: String| SupplyError::NotAPlugin {
            source_name: source_name.to_owned(),
            problem,
        };
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Kind {
            media_type: Option<String>,
        }
        let kind: Kind = serde_json::from_slice(bytes)
            .map_err(|error| not_a_plugin(format!("its manifest is not valid JSON: {error}")))?;
        if kind.media_type.as_deref() == Some(INDEX_MEDIA_TYPE) {
            return Err(not_a_plugin(
                "it is an image index (several manifests), not one artifact; give the \
                 reference of the plugin's own manifest"
                    .into(),
            ));
        }
        let manifest: ImageManifest = serde_json::from_slice(bytes).map_err(|error| {
            not_a_plugin(format!(
                "its manifest is not an OCI image manifest: {error}"
            ))
        })?;
        if manifest.schema_version != 2 {
            return Err(not_a_plugin(format!(
                "its manifest has schemaVersion {}, not 2",
                manifest.schema_version
            )));
        }
        if let Some(media_type) = &manifest.media_type
            && media_type != MANIFEST_MEDIA_TYPE
        {
            return Err(not_a_plugin(format!(
                "its manifest is of type {}, not {MANIFEST_MEDIA_TYPE}",
                forewarn_manifest::shown::reference(media_type)
            )));
        }
        Ok(manifest)
    }

    /// The manifest's bytes as pushed (compact JSON).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest of strings and numbers serializes")
    }
}

/// The Wasm OCI artifact's config (`application/vnd.wasm.config.v0+json`), as `wkg` writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// When the artifact was made, RFC 3339.
    pub created: String,
    /// Who made it, if said.
    #[serde(default)]
    pub author: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// `wasip2` for a component.
    pub os: String,
    /// The digests of the layers, in order.
    #[serde(default)]
    pub layer_digests: Vec<String>,
    /// What the component imports and exports.
    #[serde(default)]
    pub component: Option<ComponentInfo>,
}

/// A component's imports and exports in the config.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComponentInfo {
    /// Interfaces it exports.
    pub exports: Vec<String>,
    /// Interfaces it imports.
    pub imports: Vec<String>,
    /// The world it targets, if known.
    #[serde(default)]
    pub target: Option<String>,
}

/// Everything that goes into a plugin artifact.
pub struct PluginParts<'a> {
    /// The plugin's name.
    pub name: &'a str,
    /// The component.
    pub wasm: &'a [u8],
    /// `NAME.toml`, if the plugin has one.
    pub manifest: Option<&'a [u8]>,
    /// What the manifest grants.
    pub grants: &'a GrantSummary,
    /// The WIT world the component implements.
    pub world: &'a str,
    /// The component's exports and imports.
    pub exports: Vec<String>,
    /// The component's imports.
    pub imports: Vec<String>,
    /// The version annotation (the tag, unless given).
    pub version: Option<&'a str>,
    /// RFC 3339 time of making.
    pub created: String,
}

/// An artifact ready to push: its manifest and the blobs it names.
pub struct BuiltArtifact {
    /// The manifest bytes.
    pub manifest: Vec<u8>,
    /// The config and layer blobs, (descriptor, bytes).
    pub blobs: Vec<(Descriptor, Vec<u8>)>,
}

impl BuiltArtifact {
    /// The manifest's digest.
    pub fn digest(&self) -> Digest {
        Digest::of(&self.manifest)
    }
}

/// Builds the plugin's artifact.
pub fn build_plugin_artifact(parts: &PluginParts<'_>) -> BuiltArtifact {
    let mut wasm_layer = Descriptor::of(WASM_LAYER_MEDIA_TYPE, parts.wasm);
    wasm_layer
        .annotations
        .insert(ANNOTATION_TITLE.into(), format!("{}.wasm", parts.name));
    let mut layers = vec![(wasm_layer, parts.wasm.to_vec())];
    if let Some(manifest) = parts.manifest {
        let mut layer = Descriptor::of(PLUGIN_MANIFEST_MEDIA_TYPE, manifest);
        layer
            .annotations
            .insert(ANNOTATION_TITLE.into(), format!("{}.toml", parts.name));
        layers.push((layer, manifest.to_vec()));
    }
    let config = WasmConfig {
        created: parts.created.clone(),
        author: None,
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: layers
            .iter()
            .map(|(layer, _)| layer.digest.clone())
            .collect(),
        component: Some(ComponentInfo {
            exports: parts.exports.clone(),
            imports: parts.imports.clone(),
            target: Some(parts.world.to_owned()),
        }),
    };
    let config_bytes = serde_json::to_vec(&config).expect("the config serializes");
    let config_descriptor = Descriptor::of(WASM_CONFIG_MEDIA_TYPE, &config_bytes);
    let mut annotations = BTreeMap::from([
        (ANNOTATION_NAME.to_owned(), parts.name.to_owned()),
        (ANNOTATION_TITLE.to_owned(), parts.name.to_owned()),
        (ANNOTATION_WORLD.to_owned(), parts.world.to_owned()),
        (
            ANNOTATION_GRANTS.to_owned(),
            serde_json::to_string(parts.grants).expect("the grants serialize"),
        ),
        (ANNOTATION_CREATED.to_owned(), parts.created.clone()),
    ]);
    if let Some(version) = parts.version {
        annotations.insert(ANNOTATION_VERSION.to_owned(), version.to_owned());
    }
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        artifact_type: None,
        config: config_descriptor.clone(),
        layers: layers.iter().map(|(layer, _)| layer.clone()).collect(),
        subject: None,
        annotations,
    };
    let mut blobs = vec![(config_descriptor, config_bytes)];
    blobs.extend(layers);
    BuiltArtifact {
        manifest: manifest.to_bytes(),
        blobs,
    }
}

/// The signature artifact of the manifest `subject`: its layers are OpenSSH signatures, each
/// annotated with the digest it signs. `existing` layers (signatures already there) are kept.
pub fn build_signature_artifact(
    subject: Descriptor,
    existing: Vec<Descriptor>,
    signature: &[u8],
) -> BuiltArtifact {
    let mut layer = Descriptor::of(SIGNATURE_MEDIA_TYPE, signature);
    layer
        .annotations
        .insert(ANNOTATION_SIGNED_DIGEST.into(), subject.digest.clone());
    let mut layers: Vec<Descriptor> = existing
        .into_iter()
        .filter(|old| old.digest != layer.digest)
        .collect();
    layers.push(layer);
    let config = Descriptor::of(EMPTY_MEDIA_TYPE, EMPTY_CONFIG);
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        artifact_type: Some(SIGNATURE_MEDIA_TYPE.into()),
        config: config.clone(),
        layers,
        subject: Some(subject),
        annotations: BTreeMap::new(),
    };
    BuiltArtifact {
        manifest: manifest.to_bytes(),
        blobs: vec![
            (config, EMPTY_CONFIG.to_vec()),
            (
                Descriptor::of(SIGNATURE_MEDIA_TYPE, signature),
                signature.to_vec(),
            ),
        ],
    }
}

/// What a plugin artifact holds, after every layer was checked against its digest.
#[derive(Debug, Clone)]
pub struct PluginArtifact {
    /// The manifest's digest: what is signed, pinned and recorded.
    pub digest: Digest,
    /// The name the artifact gives the plugin, if any.
    pub name: Option<String>,
    /// Its version annotation, if any.
    pub version: Option<String>,
    /// The WIT world it claims, if any.
    pub world: Option<String>,
    /// What its annotations claim the manifest grants; `None` when they claim nothing (an
    /// artifact not pushed by forewarn).
    pub claimed: Option<GrantSummary>,
    /// The component.
    pub wasm: Vec<u8>,
    /// `NAME.toml`, if the artifact has one.
    pub manifest_toml: Option<String>,
}

/// The layers forewarn takes from a plugin artifact: which is which, and its size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// The component.
    Component,
    /// `NAME.toml`.
    PluginManifest,
}

/// A layer a plugin artifact does not have: its media type (as shown, escaped and cut).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "it has a layer of type {shown_type}; a plugin has one {WASM_LAYER_MEDIA_TYPE} layer and \
     at most one {PLUGIN_MANIFEST_MEDIA_TYPE} layer"
)]
pub struct ForeignLayer {
    /// The layer's media type, escaped and cut for showing.
    pub shown_type: String,
}

impl LayerKind {
    /// The kind of a plugin artifact's layer, or why it does not belong.
    pub fn of(layer: &Descriptor) -> Result<LayerKind, ForeignLayer> {
        match layer.media_type.as_str() {
            WASM_LAYER_MEDIA_TYPE => Ok(LayerKind::Component),
            PLUGIN_MANIFEST_MEDIA_TYPE => Ok(LayerKind::PluginManifest),
            other => Err(ForeignLayer {
                shown_type: forewarn_manifest::shown::reference(other),
            }),
        }
    }
}

/// Checks the manifest's shape: the wasm config, one component layer, at most one manifest
/// layer and nothing else.
pub fn check_plugin_shape(manifest: &ImageManifest, source_name: &str) -> Result<(), SupplyError> {
    let not_a_plugin = |problem: String| SupplyError::NotAPlugin {
        source_name: source_name.to_owned(),
        problem,
    };
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(not_a_plugin(format!(
            "its config is of type {}, not {WASM_CONFIG_MEDIA_TYPE} (a Wasm OCI artifact); \
             push plugins with `forewarn plugin push` or `wkg oci push`",
            forewarn_manifest::shown::reference(&manifest.config.media_type)
        )));
    }
    let mut components = 0;
    let mut manifests = 0;
    for layer in &manifest.layers {
        match LayerKind::of(layer).map_err(|foreign| not_a_plugin(foreign.to_string()))? {
            LayerKind::Component => components += 1,
            LayerKind::PluginManifest => manifests += 1,
        }
    }
    if components != 1 || manifests > 1 {
        return Err(not_a_plugin(format!(
            "it has {components} component layer(s) and {manifests} manifest layer(s); a plugin \
             has exactly one component and at most one manifest"
        )));
    }
    Ok(())
}

/// Refuses an artifact with an annotation over [`MAX_ANNOTATION_BYTES`].
pub fn check_annotations(manifest: &ImageManifest, source_name: &str) -> Result<(), SupplyError> {
    for (key, value) in &manifest.annotations {
        let size = key.len() + value.len();
        if size > MAX_ANNOTATION_BYTES {
            return Err(SupplyError::NotAPlugin {
                source_name: source_name.to_owned(),
                problem: format!(
                    "its annotation {} is {size} bytes, more than the {MAX_ANNOTATION_BYTES} \
                     bytes forewarn accepts of one (a version is a few bytes, the grants a few \
                     hundred); nothing was installed. Ask its author to push it again with \
                     `forewarn plugin push` (and a short --version)",
                    forewarn_manifest::shown::name(key)
                ),
            });
        }
    }
    Ok(())
}

/// The grants the annotations claim, if any; an unreadable claim is an error.
pub fn claimed_grants(
    manifest: &ImageManifest,
    source_name: &str,
) -> Result<Option<GrantSummary>, SupplyError> {
    let Some(text) = manifest.annotations.get(ANNOTATION_GRANTS) else {
        return Ok(None);
    };
    serde_json::from_str::<serde_json::Value>(text)
        .and_then(GrantSummary::read)
        .map(Some)
        .map_err(|error| SupplyError::NotAPlugin {
            source_name: source_name.to_owned(),
            problem: format!("its {ANNOTATION_GRANTS} annotation is not readable: {error}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use forewarn_manifest::PluginManifest;

    #[test]
    fn a_built_artifact_has_the_wasm_layout_and_the_claims() {
        let manifest = PluginManifest::parse("[capabilities]\nactions = [\"stop-app\"]\n").unwrap();
        let grants = GrantSummary::of(&manifest);
        let built = build_plugin_artifact(&PluginParts {
            name: "drain",
            wasm: b"\0asm",
            manifest: Some(b"[capabilities]\nactions = [\"stop-app\"]\n"),
            grants: &grants,
            world: "forewarn:plugin/event-handler@0.2.0",
            exports: vec![],
            imports: vec![],
            version: Some("1.0.0"),
            created: "2025-01-01T00:00:00Z".into(),
        });
        let parsed = ImageManifest::parse(&built.manifest, "test").unwrap();
        check_plugin_shape(&parsed, "test").unwrap();
        assert_eq!(parsed.config.media_type, WASM_CONFIG_MEDIA_TYPE);
        assert_eq!(parsed.layers[0].media_type, WASM_LAYER_MEDIA_TYPE);
        assert_eq!(parsed.layers[1].media_type, PLUGIN_MANIFEST_MEDIA_TYPE);
        assert_eq!(claimed_grants(&parsed, "test").unwrap(), Some(grants));
        assert_eq!(parsed.annotations[ANNOTATION_VERSION], "1.0.0");
        let config: WasmConfig = serde_json::from_slice(&built.blobs[0].1).unwrap();
        assert_eq!(config.layer_digests.len(), 2);
    }

    #[test]
    fn an_index_or_a_foreign_layer_is_not_a_plugin() {
        let index = format!(
            "{{\"schemaVersion\":2,\"mediaType\":\"{INDEX_MEDIA_TYPE}\",\"manifests\":[]}}"
        );
        let error = ImageManifest::parse(index.as_bytes(), "x")
            .unwrap_err()
            .to_string();
        assert!(error.contains("image index"), "{error}");
        let mut manifest = one_layer_manifest();
        check_plugin_shape(&manifest, "x").unwrap();
        manifest
            .layers
            .push(Descriptor::of("application/x-sh", b"rm -rf /"));
        let error = check_plugin_shape(&manifest, "x").unwrap_err().to_string();
        assert!(error.contains("application/x-sh"), "{error}");
    }

    /// A plugin artifact's manifest with one wasm layer and no annotations.
    fn one_layer_manifest() -> ImageManifest {
        ImageManifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            artifact_type: None,
            config: Descriptor::of(WASM_CONFIG_MEDIA_TYPE, b"{}"),
            layers: vec![Descriptor::of(WASM_LAYER_MEDIA_TYPE, b"a")],
            subject: None,
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn a_claim_is_read_in_either_form_and_whole() {
        let mut manifest = one_layer_manifest();
        let flat = r#"{"actions":["stop-app"],"readiness":false,"http":[],"azure-identity":[],"memory":"64.0 MiB","budget":"10s"}"#;
        for (claim, readable) in [(flat.to_owned(), true), (format!("{flat} trailing"), false)] {
            manifest.annotations.insert(ANNOTATION_GRANTS.into(), claim);
            let claimed = claimed_grants(&manifest, "x");
            match readable {
                true => assert_eq!(claimed.unwrap().unwrap().capabilities.actions, ["stop-app"]),
                false => assert!(claimed.is_err(), "trailing text was accepted"),
            }
        }
    }
}

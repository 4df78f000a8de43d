//! Artifacts a hostile author (or registry) makes: the probe with any `NAME.toml`, any
//! plugin name and any version annotation, built and pushed through forewarn's library
//! without the checks `forewarn plugin push` applies, then signed by a trusted key (the
//! author's key signs whatever they push).

use std::collections::BTreeMap;
use std::path::Path;

use forewarn_manifest::GrantSummary;
use forewarn_manifest::PluginManifest;
use forewarn_supply::artifact::{self, BuiltArtifact, Descriptor, PluginParts};
use forewarn_supply::reference::Digest;
use forewarn_supply::registry::RegistryClient;

use crate::guests;

/// The probe's artifact with `manifest` as its `NAME.toml` (claiming what it grants, when it
/// parses), named `name` and versioned `version` in its annotations, whatever they hold.
pub fn artifact(name: &str, version: &str, manifest: &str) -> BuiltArtifact {
    let wasm = std::fs::read(guests::PROBE).expect("the probe guest is built");
    let grants = PluginManifest::parse(manifest)
        .map(|parsed| GrantSummary::of(&parsed))
        .unwrap_or_else(|_| GrantSummary::of(&PluginManifest::default()));
    artifact::build_plugin_artifact(&PluginParts {
        name,
        wasm: &wasm,
        manifest: Some(manifest.as_bytes()),
        grants: &grants,
        world: "forewarn:plugin/event-handler@0.3.0",
        exports: vec![],
        imports: vec![],
        version: Some(version),
        created: "2026-01-01T00:00:00Z".into(),
    })
}

/// Pushes `built` as `tag` with `client`, and its signature by the OpenSSH key `key`.
pub async fn push_signed(
    client: &RegistryClient,
    tag: &str,
    built: &BuiltArtifact,
    key: &Path,
) -> Digest {
    for (_, bytes) in &built.blobs {
        client
            .push_blob(bytes, "a crafted blob")
            .await
            .expect("push a blob");
    }
    client
        .push_manifest(tag, &built.manifest)
        .await
        .expect("push the crafted manifest");
    let digest = built.digest();
    let armored = forewarn_supply::signature::sign(&digest, key).expect("sign");
    let subject = Descriptor {
        media_type: artifact::MANIFEST_MEDIA_TYPE.into(),
        digest: digest.to_string(),
        size: built.manifest.len() as u64,
        annotations: BTreeMap::new(),
    };
    let signature = artifact::build_signature_artifact(subject, Vec::new(), &armored);
    for (_, bytes) in &signature.blobs {
        client
            .push_blob(bytes, "a signature blob")
            .await
            .expect("push a blob");
    }
    client
        .push_manifest(&digest.signature_tag(), &signature.manifest)
        .await
        .expect("push the signature");
    digest
}

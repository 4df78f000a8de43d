//! Installing a fetched plugin into the plugin directory, and the lock-file operations
//! around it (upgrade, rollback, remove).
//!
//! The order is what keeps a failure harmless: every check (digests, signature, manifest,
//! grants against the annotations' claims, the component check) and the operator's consent
//! come before the first byte is written. Then the new files are written under names the
//! watcher ignores, the running version is copied to `.previous/`, the new files are renamed
//! into place (manifest first, so hot reload loads the pair together) and `plugins.lock` is
//! written last. A failure while writing puts the previous files back.

use std::path::{Path, PathBuf};

use crate::artifact::{self, LayerKind};
use crate::component_check::check_component_async;
use crate::error::SupplyError;
use crate::fetch::Fetched;
use crate::lock::{LockEntry, Lockfile, write_atomically};
use crate::reference::Digest;
use crate::signature::{self, Signer, TrustedKeys, Verdict};
use crate::version::{ArtifactAge, Downgrade};
use forewarn_manifest::GrantSummary;
use forewarn_manifest::PluginManifest;
use forewarn_manifest::name_problem;
use forewarn_manifest::shown;
use forewarn_pipeline::log_fields::rfc3339;

/// Where previous versions are kept, inside the plugin directory (a dot directory: the
/// watcher ignores it).
pub const PREVIOUS_DIR: &str = ".previous";

/// Who runs the command: what they are told, and whether they agree.
pub trait Operator {
    /// Shows `text` (a few lines) to the operator.
    fn say(&mut self, text: &str);
    /// Asks `question`; true when the operator agrees. An error when they cannot be asked.
    fn consent(&mut self, question: &str) -> Result<bool, SupplyError>;
}

/// Install a new plugin, or upgrade one already installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `plugin install`: the name must be free.
    Install,
    /// `plugin upgrade`: the name must be installed; consent only when a grant widens.
    Upgrade,
}

/// What to install and how.
pub struct InstallRequest<'a> {
    /// The fetched artifact.
    pub fetched: Fetched,
    /// What the lock records as its source (the reference with its digest, or a path).
    pub source: String,
    /// The name to install it as (`--as`); default: the artifact's, else `fallback_name`.
    pub name: Option<String>,
    /// The name when neither `--as` nor the artifact gives one (the repository's last part).
    pub fallback_name: String,
    /// `[plugins] trusted-keys`.
    pub trusted: &'a TrustedKeys,
    /// `--allow-unsigned`.
    pub allow_unsigned: bool,
    /// Install or upgrade.
    pub mode: Mode,
    /// `--allow-downgrade`: an upgrade may install an older artifact than the one installed.
    pub allow_downgrade: bool,
}

/// What an install did.
#[derive(Debug, Clone, PartialEq)]
pub struct Installed {
    /// The plugin's name.
    pub name: String,
    /// The artifact's digest.
    pub digest: Digest,
    /// Who signed it, if a trusted key did.
    pub signer: Option<Signer>,
    /// False when the same version was installed already (nothing written).
    pub changed: bool,
    /// True when an upgrade went back to an older artifact (`--allow-downgrade`).
    pub downgraded: bool,
}

/// Refuses a plugin name that could not be a file in the plugin directory (or would name
/// one outside it), echoing it escaped.
pub fn check_name(name: &str) -> Result<(), SupplyError> {
    match name_problem(name) {
        None => Ok(()),
        Some(problem) => Err(SupplyError::Usage(format!(
            "\"{}\" cannot be a plugin name: {problem}; pass --as NAME (1 to 64 of a-z, 0-9, '-', '_')",
            shown::name(name)
        ))),
    }
}

/// Checks the fetched plugin, asks for consent, and writes it into `plugin_dir`.
pub async fn install(
    plugin_dir: &Path,
    request: InstallRequest<'_>,
    operator: &mut dyn Operator,
) -> Result<Installed, SupplyError> {
    let _guard = DirLock::take(plugin_dir)?;
    let fetched = &request.fetched;
    let source_name = fetched.source_name.clone();
    let name = request
        .name
        .clone()
        .or_else(|| {
            fetched
                .manifest
                .annotations
                .get(artifact::ANNOTATION_NAME)
                .cloned()
        })
        .unwrap_or_else(|| request.fallback_name.clone());
    check_name(&name)?;
    // The manifest, parsed as the daemon will parse it from the plugin directory.
    let toml_text = match fetched.layer(LayerKind::PluginManifest) {
        Some(bytes) => {
            Some(
                String::from_utf8(bytes.to_vec()).map_err(|_| SupplyError::NotAPlugin {
                    source_name: source_name.clone(),
                    problem: "its manifest layer is not UTF-8 text".into(),
                })?,
            )
        }
        None => None,
    };
    let manifest_path = plugin_dir.join(format!("{name}.toml"));
    let manifest = match &toml_text {
        Some(text) => PluginManifest::from_text(&manifest_path, text).map_err(|error| {
            SupplyError::Check(format!("{source_name}: {error}; nothing was installed"))
        })?,
        None => PluginManifest::default(),
    };
    let grants = GrantSummary::of(&manifest);
    if let Some(claimed) = artifact::claimed_grants(&fetched.manifest, &source_name)? {
        let excess = grants.beyond(&claimed);
        if !excess.is_empty() {
            return Err(SupplyError::GrantsBeyondClaims {
                source_name,
                excess,
            });
        }
    }
    let verdict = signature::verify(&fetched.digest, &fetched.signatures(), request.trusted);
    let signer = match &verdict {
        Verdict::Trusted(signer) => Some(signer.clone()),
        _ => None,
    };
    if let Some(refusal) = signature::refusal(&verdict, &source_name, request.trusted) {
        if !request.allow_unsigned {
            return Err(SupplyError::Signature(refusal));
        }
        operator.say(&format!(
            "WARNING: --allow-unsigned: INSTALLING A PLUGIN WHOSE AUTHOR FOREWARN CANNOT VERIFY.\n\
             {}\nIts code will run on this VM with the grants below.\n",
            shown::message(&refusal)
        ));
    }
    let wasm = fetched
        .layer(LayerKind::Component)
        .expect("the artifact's shape was checked: one component layer")
        .to_vec();
    let checked = check_component_async(&name, wasm.clone(), manifest).await?;
    let mut lock = Lockfile::read(plugin_dir)?;
    let wasm_path = plugin_dir.join(format!("{name}.wasm"));
    let old_entry = lock.plugins.get(&name).cloned();
    let described = describe_artifact(&name, fetched, &checked.world, &signer);
    let age = ArtifactAge::of_manifest(&fetched.manifest);
    let mut downgraded = false;
    match (request.mode, &old_entry) {
        (Mode::Install, Some(entry)) => {
            return Err(SupplyError::Conflict(format!(
                "{name} is installed already (from {}); `forewarn plugin upgrade {name}` installs \
                 a newer version, or `forewarn plugin remove {name}` first",
                entry.source_shown()
            )));
        }
        (Mode::Install, None) if wasm_path.exists() => {
            return Err(SupplyError::Conflict(format!(
                "{} exists and was not installed by `forewarn plugin install`; remove it first, \
                 or install this plugin under another name with --as NAME",
                shown::reference(&wasm_path.display().to_string())
            )));
        }
        (Mode::Install, None) => {
            operator.say(&format!(
                "{described}\nIt will be granted:\n{}",
                grants.describe()
            ));
            if !operator.consent(&format!("Install {name} with these grants?"))? {
                return Err(SupplyError::NoConsent(format!(
                    "{name} was not installed: you declined"
                )));
            }
        }
        (Mode::Upgrade, None) => {
            return Err(SupplyError::Conflict(format!(
                "{name} was not installed with `forewarn plugin install`, so there is nothing to \
                 upgrade; install it with `forewarn plugin install REF --as {name}` after removing \
                 its files"
            )));
        }
        (Mode::Upgrade, Some(entry)) => {
            if entry.digest == fetched.digest.as_str() {
                operator.say(&format!(
                    "{name} is already at {} ({}).\n",
                    fetched.digest,
                    entry.source_shown()
                ));
                return Ok(Installed {
                    name,
                    digest: fetched.digest.clone(),
                    signer,
                    changed: false,
                    downgraded: false,
                });
            }
            let installed_age = ArtifactAge::of_entry(entry);
            if let Some(downgrade) = age.older_than(&installed_age) {
                let label = |age: &ArtifactAge, digest: &str| match &age.version {
                    Some(version) => format!("version {}", shown::version(version)),
                    None => format!("artifact {}", short(digest)),
                };
                let offered = label(&age, fetched.digest.as_str());
                let installed = label(&installed_age, &entry.digest);
                let why = match downgrade {
                    Downgrade::LowerVersion => "a lower version",
                    Downgrade::MadeEarlier => "the same version, made earlier",
                };
                if !request.allow_downgrade {
                    return Err(SupplyError::Downgrade {
                        name,
                        offered,
                        installed,
                        why,
                    });
                }
                operator.say(&format!(
                    "DOWNGRADING {name} (--allow-downgrade): {offered} is older than the \
                     installed {installed} ({why}).\n"
                ));
                downgraded = true;
            }
            consent_to_grants(
                operator,
                VersionChange::Upgrade,
                &name,
                &format!(
                    "{described}\nUpgrading from {} ({}).",
                    entry.source_shown(),
                    short(&entry.digest)
                ),
                &grants,
                entry,
            )?;
        }
    }
    let entry = LockEntry {
        source: request.source.clone(),
        digest: fetched.digest.to_string(),
        wasm_sha256: checked.report.content_hash.clone(),
        manifest_sha256: toml_text
            .as_ref()
            .map(|text| Digest::of(text.as_bytes()).hex().to_owned()),
        signer: signer.as_ref().map(|signer| signer.name.clone()),
        signer_key: signer.as_ref().map(|signer| signer.fingerprint.clone()),
        version: age.version,
        created: age.created,
        installed_at: rfc3339(std::time::SystemTime::now()),
        grants,
        previous: old_entry.map(|old| Box::new(old.without_previous())),
    };
    let files = VersionFiles {
        wasm,
        manifest: toml_text.map(String::into_bytes),
    };
    put_in_place(plugin_dir, &name, &files, &mut lock, entry)?;
    Ok(Installed {
        name,
        digest: fetched.digest.clone(),
        signer,
        changed: true,
        downgraded,
    })
}

/// Puts the previous version of `name` back (kept in `.previous/`), keeping the current one
/// as the new previous: a second rollback rolls forward. A version put back that is granted
/// more than the running one needs the operator's consent, as an upgrade does.
pub fn rollback(
    plugin_dir: &Path,
    name: &str,
    operator: &mut dyn Operator,
) -> Result<LockEntry, SupplyError> {
    check_name(name)?;
    let _guard = DirLock::take(plugin_dir)?;
    let mut lock = Lockfile::read(plugin_dir)?;
    let current = lock.plugins.get(name).cloned().ok_or_else(|| {
        SupplyError::Conflict(format!(
            "{name} was not installed with `forewarn plugin install`: there is no previous version to go back to"
        ))
    })?;
    let previous = current.previous.clone().ok_or_else(|| {
        SupplyError::Conflict(format!(
            "no previous version of {name} is kept (it was installed once, never upgraded)"
        ))
    })?;
    let kept = plugin_dir.join(PREVIOUS_DIR);
    let wasm = read_kept(
        &kept.join(format!("{name}.wasm")),
        Some(&previous.wasm_sha256),
    )?;
    let manifest = match &previous.manifest_sha256 {
        Some(hash) => Some(read_kept(&kept.join(format!("{name}.toml")), Some(hash))?),
        None => None,
    };
    let mut entry = (*previous).clone();
    entry.previous = Some(Box::new(current.without_previous()));
    // The version put back may be granted more than the one running (a second rollback
    // rolls forward, or the last upgrade narrowed): asked as an upgrade asks.
    consent_to_grants(
        operator,
        VersionChange::Rollback,
        name,
        &format!(
            "Rolling {name} back from {} ({}) to {} ({}), signed by {}.",
            current.source_shown(),
            short(&current.digest),
            previous.source_shown(),
            short(&previous.digest),
            previous.signer_label()
        ),
        &previous.grants,
        &current,
    )?;
    put_in_place(
        plugin_dir,
        name,
        &VersionFiles { wasm, manifest },
        &mut lock,
        entry.clone(),
    )?;
    Ok(entry)
}

/// A change from the running version to another one already on hand or fetched.
#[derive(Debug, Clone, Copy)]
enum VersionChange {
    /// `plugin upgrade`.
    Upgrade,
    /// `plugin rollback`.
    Rollback,
}

/// Tells the operator `heading` and how `grants` differ from those of `running` (what they
/// agreed to before), and, when `grants` are wider, asks again: an error when they decline
/// or cannot be asked, and nothing is changed then. `plugin upgrade` and `plugin rollback`
/// alike: neither widens a plugin's grants without consent.
fn consent_to_grants(
    operator: &mut dyn Operator,
    change: VersionChange,
    name: &str,
    heading: &str,
    grants: &GrantSummary,
    running: &LockEntry,
) -> Result<(), SupplyError> {
    let diff = grants.diff_from(&running.grants);
    let widening = grants.beyond(&running.grants);
    let changes = match diff.is_empty() {
        true => "  (no change in what it is granted)\n".to_owned(),
        false => diff.iter().map(|line| format!("  {line}\n")).collect(),
    };
    operator.say(&format!("{heading} Grants:\n{changes}"));
    if widening.is_empty() {
        return Ok(());
    }
    let (noun, ask, done) = match change {
        VersionChange::Upgrade => ("upgrade", "Upgrade?", "upgraded"),
        VersionChange::Rollback => ("rollback", "Roll back?", "rolled back"),
    };
    let question = format!(
        "This {noun} grants {name} more than you agreed to before ({}). {ask}",
        widening.join("; ")
    );
    if !operator.consent(&question)? {
        return Err(SupplyError::NoConsent(format!(
            "{name} was not {done}: you declined wider grants; {} keeps running",
            running.source_shown()
        )));
    }
    Ok(())
}

/// Removes `name`'s files, its kept previous version and its lock entry.
pub fn remove(plugin_dir: &Path, name: &str) -> Result<Option<LockEntry>, SupplyError> {
    check_name(name)?;
    let _guard = DirLock::take(plugin_dir)?;
    let mut lock = Lockfile::read(plugin_dir)?;
    let wasm = plugin_dir.join(format!("{name}.wasm"));
    let entry = lock.plugins.remove(name);
    if entry.is_none() && !wasm.exists() {
        return Err(SupplyError::Usage(format!(
            "there is no plugin {name} in {} (`forewarn plugin list` shows what there is)",
            plugin_dir.display()
        )));
    }
    // The component first: the daemon unloads the plugin as soon as it is gone.
    for path in [
        wasm,
        plugin_dir.join(format!("{name}.toml")),
        plugin_dir.join(PREVIOUS_DIR).join(format!("{name}.wasm")),
        plugin_dir.join(PREVIOUS_DIR).join(format!("{name}.toml")),
    ] {
        remove_if_present(&path)?;
    }
    lock.write(plugin_dir)?;
    Ok(entry)
}

/// The files of one version of a plugin.
struct VersionFiles {
    wasm: Vec<u8>,
    manifest: Option<Vec<u8>>,
}

/// Stages the new files, keeps the running ones in `.previous/`, renames the new ones into
/// place (manifest first) and writes the lock with `entry`; puts the old files back if a
/// step fails.
fn put_in_place(
    plugin_dir: &Path,
    name: &str,
    files: &VersionFiles,
    lock: &mut Lockfile,
    entry: LockEntry,
) -> Result<(), SupplyError> {
    let live_wasm = plugin_dir.join(format!("{name}.wasm"));
    let live_toml = plugin_dir.join(format!("{name}.toml"));
    let staged_wasm = plugin_dir.join(format!(".{name}.wasm.forewarn-new"));
    let staged_toml = plugin_dir.join(format!(".{name}.toml.forewarn-new"));
    let stage = || -> Result<(), SupplyError> {
        write_staged(&staged_wasm, &files.wasm)?;
        if let Some(manifest) = &files.manifest {
            write_staged(&staged_toml, manifest)?;
        }
        Ok(())
    };
    if let Err(error) = stage() {
        let _ = std::fs::remove_file(&staged_wasm);
        let _ = std::fs::remove_file(&staged_toml);
        return Err(error);
    }
    let kept = keep_running_version(plugin_dir, name, &live_wasm, &live_toml);
    let kept = match kept {
        Ok(kept) => kept,
        Err(error) => {
            let _ = std::fs::remove_file(&staged_wasm);
            let _ = std::fs::remove_file(&staged_toml);
            return Err(error);
        }
    };
    let swap = || -> Result<(), SupplyError> {
        let fix = "check that you may write the plugin directory";
        match files.manifest {
            Some(_) => std::fs::rename(&staged_toml, &live_toml)
                .map_err(|source| SupplyError::io("rename into place", &live_toml, source, fix))?,
            None => remove_if_present(&live_toml)?,
        }
        std::fs::rename(&staged_wasm, &live_wasm)
            .map_err(|source| SupplyError::io("rename into place", &live_wasm, source, fix))?;
        lock.plugins.insert(name.to_owned(), entry);
        lock.write(plugin_dir)
    };
    if let Err(error) = swap() {
        let _ = std::fs::remove_file(&staged_wasm);
        let _ = std::fs::remove_file(&staged_toml);
        restore(plugin_dir, name, &kept, &live_wasm, &live_toml);
        return Err(error);
    }
    Ok(())
}

/// The running version's files, as kept in `.previous/` (None when nothing was running).
struct KeptVersion {
    wasm: Option<PathBuf>,
    manifest: Option<PathBuf>,
}

/// Copies the running files into `.previous/` (the live files stay until replaced).
fn keep_running_version(
    plugin_dir: &Path,
    name: &str,
    live_wasm: &Path,
    live_toml: &Path,
) -> Result<KeptVersion, SupplyError> {
    if !live_wasm.exists() {
        return Ok(KeptVersion {
            wasm: None,
            manifest: None,
        });
    }
    let kept_dir = plugin_dir.join(PREVIOUS_DIR);
    refuse_previous_not_a_directory(&kept_dir)?;
    forewarn_platform::file_access::create_shared_dir(&kept_dir).map_err(|source| {
        SupplyError::io(
            "create",
            &kept_dir,
            source,
            "check that you may write the plugin directory",
        )
    })?;
    let copy = |live: &Path, file_name: String| -> Result<PathBuf, SupplyError> {
        let bytes = std::fs::read(live)
            .map_err(|source| SupplyError::io("read", live, source, "check its permissions"))?;
        let kept = kept_dir.join(&file_name);
        write_atomically(&kept_dir.join(format!(".{file_name}.tmp")), &kept, &bytes)?;
        Ok(kept)
    };
    let wasm = copy(live_wasm, format!("{name}.wasm"))?;
    let manifest = match live_toml.exists() {
        true => Some(copy(live_toml, format!("{name}.toml"))?),
        false => {
            remove_if_present(&kept_dir.join(format!("{name}.toml")))?;
            None
        }
    };
    Ok(KeptVersion {
        wasm: Some(wasm),
        manifest,
    })
}

/// Refuses a `.previous` that is a symbolic link (or junction) or not a directory: the
/// running version would be written wherever it points.
fn refuse_previous_not_a_directory(kept_dir: &Path) -> Result<(), SupplyError> {
    let metadata = match std::fs::symlink_metadata(kept_dir) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SupplyError::io(
                "inspect",
                kept_dir,
                source,
                "check that you may read the plugin directory",
            ));
        }
    };
    let kind = if metadata.file_type().is_symlink() || is_reparse_point(&metadata) {
        "a symbolic link"
    } else if metadata.is_dir() {
        return Ok(());
    } else {
        "a file"
    };
    let path = shown::reference(&kept_dir.display().to_string());
    Err(SupplyError::Conflict(format!(
        "{path} is {kind}, not a directory: forewarn keeps each plugin's previous version there \
         and will not write through a link (or over a file) to somewhere else, so nothing was \
         changed. Check who made it, remove it (`rm {path}`; forewarn makes the directory \
         again) and run the command again"
    )))
}

/// A Windows junction or other reparse point (not a plain directory).
#[cfg(windows)]
fn is_reparse_point(metadata: &std::fs::Metadata) -> bool {
    use std::os::windows::fs::MetadataExt;
    const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x400;
    metadata.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0
}

#[cfg(not(windows))]
fn is_reparse_point(_metadata: &std::fs::Metadata) -> bool {
    false
}

/// Puts the kept files back after a failed swap (best effort: the error is reported anyway).
fn restore(plugin_dir: &Path, name: &str, kept: &KeptVersion, live_wasm: &Path, live_toml: &Path) {
    let put_back = |kept: &Path, live: &Path, file_name: &str| {
        if let Ok(bytes) = std::fs::read(kept) {
            let _ = write_atomically(
                &plugin_dir.join(format!(".{file_name}.restore")),
                live,
                &bytes,
            );
        }
    };
    match &kept.manifest {
        Some(path) => put_back(path, live_toml, &format!("{name}.toml")),
        None if kept.wasm.is_some() => {
            let _ = std::fs::remove_file(live_toml);
        }
        None => {}
    }
    if let Some(path) = &kept.wasm {
        put_back(path, live_wasm, &format!("{name}.wasm"));
    }
}

fn write_staged(path: &Path, bytes: &[u8]) -> Result<(), SupplyError> {
    let temporary = path.with_extension("tmp");
    write_atomically(&temporary, path, bytes)
}

fn remove_if_present(path: &Path) -> Result<(), SupplyError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SupplyError::io(
            "remove",
            path,
            source,
            "check that you may write the plugin directory",
        )),
    }
}

/// A kept file, checked against the hash the lock recorded for it.
fn read_kept(path: &Path, sha256: Option<&str>) -> Result<Vec<u8>, SupplyError> {
    let bytes = std::fs::read(path).map_err(|source| {
        SupplyError::io("read the kept previous version", path, source, "it was removed by hand; install the version you want with `forewarn plugin upgrade NAME REF`")
    })?;
    if let Some(expected) = sha256
        && Digest::of(&bytes).hex() != expected
    {
        return Err(SupplyError::DigestMismatch {
            what: format!("the kept previous version {}", path.display()),
            expected: format!("sha256:{expected}"),
            actual: Digest::of(&bytes).to_string(),
        });
    }
    Ok(bytes)
}

/// What the artifact is, in a few lines.
fn describe_artifact(
    name: &str,
    fetched: &Fetched,
    world: &str,
    signer: &Option<Signer>,
) -> String {
    // Every string here but the name (checked) and the digest (computed) comes from outside:
    // escaped and cut, so the artifact cannot clear the screen and print a consent of its own.
    let version = fetched
        .manifest
        .annotations
        .get(artifact::ANNOTATION_VERSION)
        .map(|version| format!(" version {}", shown::version(version)))
        .unwrap_or_default();
    let signed = match signer {
        Some(signer) => format!("signed by {}", shown::reference(&signer.to_string())),
        None => "NOT SIGNED by a trusted key".to_owned(),
    };
    format!(
        "{name}{version} from {}\n  digest: {}\n  world:  {}\n  {signed}\n",
        shown::reference(&fetched.source_name),
        fetched.digest,
        shown::reference(world)
    )
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

/// An exclusive lock on the plugin directory itself (`flock`; on Windows the directory held
/// open for writing), so two commands never change it at once; nothing is created for it.
struct DirLock {
    _held: forewarn_platform::file_access::DirLock,
}

impl DirLock {
    fn take(plugin_dir: &Path) -> Result<DirLock, SupplyError> {
        // Tried for up to a second: a process that forks a child (a compile, a command) while
        // a lock is held lends the child the lock's descriptor until the child execs, and a
        // library caller (a test, a tool) that just released the lock may find it still
        // held for those few milliseconds. Another command really at work holds it longer.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let held = loop {
            let held =
                forewarn_platform::file_access::try_lock_dir(plugin_dir).map_err(|source| {
                    SupplyError::io(
                        "open the plugin directory",
                        plugin_dir,
                        source,
                        "check that it exists (`plugin-dir` in the config, or --plugins DIR)",
                    )
                })?;
            if held.is_some() || std::time::Instant::now() >= deadline {
                break held;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let Some(held) = held else {
            return Err(SupplyError::Conflict(format!(
                "another `forewarn plugin` command is changing {} right now; wait for it to finish",
                plugin_dir.display()
            )));
        };
        Ok(DirLock { _held: held })
    }
}

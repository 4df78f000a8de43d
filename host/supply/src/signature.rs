//! OpenSSH signatures over a plugin artifact's manifest digest (the `sshsig` format of
//! `ssh-keygen -Y sign`, ed25519 keys), and the operator's trusted keys.
//!
//! What is signed: the manifest digest as text (`sha256:…`, no newline), in the namespace
//! `forewarn-plugin`. Anyone can check a signature without forewarn:
//!
//! ```text
//! printf '%s' sha256:… | ssh-keygen -Y verify -f allowed_signers -I alice -n forewarn-plugin -s sig
//! ```

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use ssh_key::{Algorithm, HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use crate::error::SupplyError;
use crate::reference::Digest;

/// The sshsig namespace of forewarn's plugin signatures (`ssh-keygen -n`).
pub const NAMESPACE: &str = "forewarn-plugin";

/// One key of `[plugins] trusted-keys`.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    key: PublicKey,
}

/// Who signed an artifact: a trusted key's comment and fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The key's comment in `trusted-keys` (`alice@example.com`), or its fingerprint.
    pub name: String,
    /// `SHA256:…`, as `ssh-keygen -l` prints it.
    pub fingerprint: String,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name == self.fingerprint {
            return f.write_str(&self.name);
        }
        write!(f, "{} ({})", self.name, self.fingerprint)
    }
}

/// The operator's trusted signing keys.
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys(Vec<TrustedKey>);

/// An entry of `[plugins] trusted-keys` that is not a key forewarn verifies with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustedKeyError {
    /// Not an OpenSSH public key line.
    #[error(
        "entry {entry} ({shown}) is not an OpenSSH public key ({error}); paste the author's \
         `.pub` line, e.g. \"ssh-ed25519 AAAAC3Nz… alice@example.com\""
    )]
    NotOpenSsh {
        /// Its place in the list, from 1.
        entry: usize,
        /// The line, abbreviated.
        shown: String,
        /// What the parser said.
        error: String,
    },
    /// A key of another algorithm.
    #[error(
        "entry {entry} is a {algorithm} key; forewarn verifies ed25519 signatures only: ask \
         the author for an ed25519 key (`ssh-keygen -t ed25519`)"
    )]
    NotEd25519 {
        /// Its place in the list, from 1.
        entry: usize,
        /// Its algorithm.
        algorithm: String,
    },
}

/// Why one signature of an artifact is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum SignatureProblem {
    #[error("a signature is not an OpenSSH signature: {0}")]
    NotSshSig(String),
    #[error("the signature by {fingerprint} is for namespace \"{namespace}\", not \"{NAMESPACE}\"")]
    OtherNamespace {
        fingerprint: String,
        namespace: String,
    },
    #[error("it is signed by {fingerprint}, a key not in `[plugins] trusted-keys`")]
    UntrustedKey { fingerprint: String },
    #[error(
        "the signature by {signer} does not verify for {digest}: it was made for another \
         artifact, or the artifact changed after it was signed"
    )]
    DoesNotVerify { signer: String, digest: String },
}

impl TrustedKeys {
    /// Parses OpenSSH public key lines (`ssh-ed25519 AAAA… comment`); the error names the
    /// entry and the fix.
    pub fn parse(lines: &[String]) -> Result<TrustedKeys, TrustedKeyError> {
        let mut keys = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            let key = PublicKey::from_openssh(line.trim()).map_err(|error| {
                TrustedKeyError::NotOpenSsh {
                    entry: index + 1,
                    shown: abbreviate(line),
                    error: error.to_string(),
                }
            })?;
            if key.algorithm() != Algorithm::Ed25519 {
                return Err(TrustedKeyError::NotEd25519 {
                    entry: index + 1,
                    algorithm: key.algorithm().to_string(),
                });
            }
            keys.push(TrustedKey { key });
        }
        Ok(TrustedKeys(keys))
    }

    /// Whether no key is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn find(&self, key: &ssh_key::public::KeyData) -> Option<&TrustedKey> {
        self.0.iter().find(|trusted| trusted.key.key_data() == key)
    }
}

impl TrustedKey {
    fn signer(&self) -> Signer {
        let fingerprint = self.key.fingerprint(HashAlg::Sha256).to_string();
        let comment = self.key.comment().trim();
        Signer {
            name: if comment.is_empty() {
                fingerprint.clone()
            } else {
                comment.to_owned()
            },
            fingerprint,
        }
    }
}

/// What the signatures of an artifact say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A trusted key signed this digest.
    Trusted(Signer),
    /// There is no signature.
    Unsigned,
    /// Signatures exist, but none by a trusted key over this digest: why, one line each.
    Refused(Vec<String>),
}

/// Checks `signatures` (armored sshsig texts) over `digest` against `trusted`.
pub fn verify(digest: &Digest, signatures: &[Vec<u8>], trusted: &TrustedKeys) -> Verdict {
    if signatures.is_empty() {
        return Verdict::Unsigned;
    }
    let mut problems = Vec::new();
    for armored in signatures {
        match verify_one(digest, armored, trusted) {
            Ok(signer) => return Verdict::Trusted(signer),
            Err(problem) => problems.push(problem.to_string()),
        }
    }
    Verdict::Refused(problems)
}

fn verify_one(
    digest: &Digest,
    armored: &[u8],
    trusted: &TrustedKeys,
) -> Result<Signer, SignatureProblem> {
    let signature = SshSig::from_pem(armored)
        .map_err(|error| SignatureProblem::NotSshSig(error.to_string()))?;
    let fingerprint = signature
        .public_key()
        .fingerprint(HashAlg::Sha256)
        .to_string();
    if signature.namespace() != NAMESPACE {
        return Err(SignatureProblem::OtherNamespace {
            fingerprint,
            namespace: signature.namespace().to_owned(),
        });
    }
    let Some(key) = trusted.find(signature.public_key()) else {
        return Err(SignatureProblem::UntrustedKey { fingerprint });
    };
    key.key
        .verify(NAMESPACE, digest.as_str().as_bytes(), &signature)
        .map_err(|_| SignatureProblem::DoesNotVerify {
            signer: key.signer().to_string(),
            digest: digest.to_string(),
        })?;
    Ok(key.signer())
}

/// The message for a verdict that refuses an install, naming the fix.
pub fn refusal(verdict: &Verdict, source_name: &str, trusted: &TrustedKeys) -> Option<String> {
    let no_keys = if trusted.is_empty() {
        " (`[plugins] trusted-keys` is empty)"
    } else {
        ""
    };
    match verdict {
        Verdict::Trusted(_) => None,
        Verdict::Unsigned => Some(format!(
            "{source_name} is not signed{no_keys}; nothing was installed. Ask its author to push \
             it with `forewarn plugin push … --sign KEY`, or, if you have checked it yourself, \
             install it with --allow-unsigned"
        )),
        Verdict::Refused(problems) => Some(format!(
            "{source_name} has no signature forewarn trusts{no_keys}: {}; nothing was installed. \
             If you trust its author, add their public key (`ssh-ed25519 AAAA… name`) to \
             `[plugins] trusted-keys` in the config; otherwise install it with \
             --allow-unsigned only after checking it yourself",
            problems.join("; ")
        )),
    }
}

/// Signs `digest` with the OpenSSH private key at `key_path`: in process for an unencrypted
/// ed25519 key; for a passphrase-protected key through `ssh-keygen -Y sign`, which asks for
/// the passphrase (or uses the agent). Returns the armored signature.
pub fn sign(digest: &Digest, key_path: &Path) -> Result<Vec<u8>, SupplyError> {
    let text = std::fs::read_to_string(key_path).map_err(|source| {
        SupplyError::io(
            "read the signing key",
            key_path,
            source,
            "pass --sign the path of an OpenSSH private key (e.g. ~/.ssh/id_ed25519)",
        )
    })?;
    let key = PrivateKey::from_openssh(&text).map_err(|error| {
        SupplyError::Usage(format!(
            "{} is not an OpenSSH private key ({error}); pass --sign an ed25519 key made with \
             `ssh-keygen -t ed25519`",
            key_path.display()
        ))
    })?;
    if key.algorithm() != Algorithm::Ed25519 {
        return Err(SupplyError::Usage(format!(
            "{} is a {} key; forewarn signs and verifies with ed25519 keys only: make one with \
             `ssh-keygen -t ed25519 -f forewarn-signing`",
            key_path.display(),
            key.algorithm()
        )));
    }
    if key.is_encrypted() {
        return sign_with_ssh_keygen(digest, key_path);
    }
    let signature = key
        .sign(NAMESPACE, HashAlg::Sha512, digest.as_str().as_bytes())
        .map_err(|error| {
            SupplyError::Usage(format!("cannot sign with {}: {error}", key_path.display()))
        })?;
    let armored = signature
        .to_pem(LineEnding::LF)
        .map_err(|error| SupplyError::Usage(format!("cannot encode the signature: {error}")))?;
    Ok(armored.into_bytes())
}

/// `ssh-keygen -Y sign` with the message on stdin and the signature on stdout; its passphrase
/// prompt goes to the terminal.
fn sign_with_ssh_keygen(digest: &Digest, key_path: &Path) -> Result<Vec<u8>, SupplyError> {
    let mut child = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(key_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| {
            SupplyError::Usage(format!(
                "{} is passphrase-protected and `ssh-keygen` (which asks for the passphrase) \
                 cannot be run: {error}; install OpenSSH's client, or sign with an unencrypted \
                 key kept for signing",
                key_path.display()
            ))
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(digest.as_str().as_bytes())
            .map_err(|error| {
                SupplyError::Usage(format!("cannot hand ssh-keygen the digest: {error}"))
            })?;
    }
    let output = child
        .wait_with_output()
        .map_err(|error| SupplyError::Usage(format!("ssh-keygen failed: {error}")))?;
    if !output.status.success() {
        return Err(SupplyError::Usage(format!(
            "ssh-keygen -Y sign with {} failed ({}); check the passphrase",
            key_path.display(),
            output.status
        )));
    }
    Ok(output.stdout)
}

fn abbreviate(line: &str) -> String {
    forewarn_runtime::cut_to_chars(line.trim(), 24)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Alice's and Mallory's keys and ssh-keygen's signature, made once by `ssh-keygen` and
    /// committed (fixtures/README.md says how), so these tests run without it (under Wine
    /// too).
    const ALICE: &str = include_str!("fixtures/alice");
    const ALICE_PUBLIC: &str = include_str!("fixtures/alice.pub");
    const MALLORY: &str = include_str!("fixtures/mallory");
    /// `printf '%s' sha256:<hex of sha256("artifact")> | ssh-keygen -Y sign -n forewarn-plugin -f alice`.
    const SSH_KEYGEN_SIGNATURE: &[u8] = include_bytes!("fixtures/artifact.alice.sshsig");

    /// A committed private key written to `dir` (as `--sign` reads it): its path.
    fn key_file(dir: &Path, name: &str, private: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, private).unwrap();
        path
    }

    #[test]
    fn our_signature_verifies_and_names_the_signer_and_another_digest_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let key = key_file(dir.path(), "alice", ALICE);
        let trusted = TrustedKeys::parse(&[ALICE_PUBLIC.trim().to_owned()]).unwrap();
        let digest = Digest::of(b"artifact");
        let signature = sign(&digest, &key).unwrap();
        let Verdict::Trusted(signer) = verify(&digest, std::slice::from_ref(&signature), &trusted)
        else {
            panic!("not trusted");
        };
        assert_eq!(signer.name, "alice@example.com");
        assert!(signer.fingerprint.starts_with("SHA256:"));
        let other = Digest::of(b"another artifact");
        let Verdict::Refused(problems) = verify(&other, &[signature], &trusted) else {
            panic!("a signature over another digest was accepted");
        };
        assert!(problems[0].contains("does not verify"), "{problems:?}");
    }

    #[test]
    fn a_key_not_trusted_is_named_by_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let mallory = key_file(dir.path(), "mallory", MALLORY);
        let trusted = TrustedKeys::parse(&[ALICE_PUBLIC.trim().to_owned()]).unwrap();
        let digest = Digest::of(b"artifact");
        let signature = sign(&digest, &mallory).unwrap();
        let verdict = verify(&digest, &[signature], &trusted);
        let message = refusal(&verdict, "r/x:1", &trusted).unwrap();
        assert!(
            message.contains("not in `[plugins] trusted-keys`"),
            "{message}"
        );
        assert!(message.contains("add their public key"), "{message}");
        assert_eq!(verify(&digest, &[], &trusted), Verdict::Unsigned);
    }

    /// The format is OpenSSH's own: forewarn accepts `ssh-keygen -Y sign`'s signature, and
    /// since ed25519 signatures are deterministic, forewarn's signature of the same digest
    /// with the same key is ssh-keygen's, byte for byte — the bytes `ssh-keygen -Y verify`
    /// accepted when the fixture was made.
    #[test]
    fn signatures_interoperate_with_ssh_keygen_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let key = key_file(dir.path(), "alice", ALICE);
        let digest = Digest::of(b"artifact");
        let trusted = TrustedKeys::parse(&[ALICE_PUBLIC.trim().to_owned()]).unwrap();
        assert!(matches!(
            verify(&digest, &[SSH_KEYGEN_SIGNATURE.to_vec()], &trusted),
            Verdict::Trusted(_)
        ));
        let ours = sign(&digest, &key).unwrap();
        // The same armored bytes (line breaks aside: both wrap the base64 at 70 columns today).
        let squeezed = |armored: &[u8]| -> String {
            String::from_utf8_lossy(armored)
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect()
        };
        assert_eq!(
            squeezed(&ours),
            squeezed(SSH_KEYGEN_SIGNATURE),
            "forewarn's signature differs from ssh-keygen's"
        );
    }

    #[test]
    fn trusted_keys_must_be_ed25519_public_keys() {
        let error = TrustedKeys::parse(&["not a key".into()])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("entry 1") && error.contains("ssh-ed25519"),
            "{error}"
        );
    }
}

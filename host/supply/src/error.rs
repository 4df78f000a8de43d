//! Why a push, pull or install did not happen. Every message says what is wrong and what to
//! do about it; an install that fails at any step has written nothing.

use std::path::PathBuf;

/// A failed supply-chain step.
#[derive(Debug, thiserror::Error)]
pub enum SupplyError {
    /// A blob or manifest does not hash to the digest it was asked for by.
    #[error(
        "{what} does not match its digest: expected {expected}, got {actual}. Someone or \
         something between the registry's storage and this machine changed it; nothing was \
         installed. Try again; if it persists, tell the registry's operator"
    )]
    DigestMismatch {
        /// What was fetched ("the component layer of …").
        what: String,
        /// The digest it was asked for by.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// Something is larger than forewarn accepts.
    #[error(
        "{what} is {size} bytes, more than the limit of {limit} bytes; nothing was installed. {fix}"
    )]
    TooLarge {
        /// What it is.
        what: String,
        /// Its size (declared or read so far).
        size: u64,
        /// The limit.
        limit: u64,
        /// How to raise the limit, or why it is fixed.
        fix: String,
    },
    /// A blob went on past the size its descriptor announces (refused there, not at the
    /// size limit).
    #[error(
        "{what}: the registry sent more than the {announced} bytes its descriptor announces \
         (refused at {read} bytes); nothing was installed. The registry does not serve what \
         was pushed; tell its operator"
    )]
    LargerThanAnnounced {
        /// What was fetched.
        what: String,
        /// The descriptor's size.
        announced: u64,
        /// How much had arrived when it was refused.
        read: u64,
    },
    /// The whole download took longer than its deadline (`--timeout`).
    #[error(
        "{what} did not finish within {} (--timeout); {outcome}. The registry is slow or \
         stalling: try again later, or give a slow link more time with --timeout (e.g. \
         --timeout 30m)",
        humantime::format_duration(*after)
    )]
    TimedOut {
        /// What was being done ("downloading registry/repo:tag").
        what: String,
        /// The deadline.
        after: std::time::Duration,
        /// What that left ("nothing was installed …").
        outcome: &'static str,
    },
    /// An upgrade would install an older artifact than the one installed.
    #[error(
        "{name}: {offered} is older than the installed {installed} ({why}); nothing was \
         changed and {installed} keeps running. A tag re-pointed at an old signed version \
         (a replay) looks like this. If you do mean to go back, pass --allow-downgrade (or \
         `forewarn plugin rollback {name}` for the version before the last upgrade)"
    )]
    Downgrade {
        /// The plugin.
        name: String,
        /// The version offered, as shown.
        offered: String,
        /// The version installed, as shown.
        installed: String,
        /// Why it is older, in words.
        why: &'static str,
    },
    /// The registry redirected to another host.
    #[error(
        "the registry {registry} redirected {what} to another host ({location}); forewarn \
         downloads only from the registry it was given, so nothing was installed. Mirror the \
         plugin into a registry that serves its blobs itself, or copy it with `forewarn plugin \
         pull` where the redirect is allowed and install the directory"
    )]
    Redirect {
        /// The registry asked.
        registry: String,
        /// What was requested.
        what: String,
        /// Where it sent us.
        location: String,
    },
    /// The registry answered with an error status.
    #[error("{what}: the registry answered {status}{detail}. {fix}")]
    Status {
        /// What was requested.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The start of its answer, if any (`: …`).
        detail: String,
        /// What to do about it.
        fix: String,
    },
    /// The connection failed or broke off.
    #[error(
        "{what}: {problem}; nothing was installed and the plugin directory is unchanged. {fix}"
    )]
    Connection {
        /// What was being done.
        what: String,
        /// What went wrong.
        problem: String,
        /// What to do about it ("Check that the registry is reachable and try again", or
        /// the flag a TLS failure needs).
        fix: String,
    },
    /// The artifact is not a forewarn plugin artifact.
    #[error("{source_name} is not a forewarn plugin artifact: {problem}")]
    NotAPlugin {
        /// The reference or path.
        source_name: String,
        /// What is wrong, and the fix.
        problem: String,
    },
    /// The plugin's manifest grants more than the artifact's annotations claim.
    #[error(
        "{source_name}: the plugin's manifest grants more than the artifact's annotations claim \
         (what registries and reviewers see): {}. The artifact was altered or built wrongly; \
         nothing was installed. Ask its author to push it again with `forewarn plugin push`",
        excess.join("; ")
    )]
    GrantsBeyondClaims {
        /// The reference or path.
        source_name: String,
        /// Each grant beyond the claims.
        excess: Vec<String>,
    },
    /// No trusted signature.
    #[error("{0}")]
    Signature(String),
    /// The component or its manifest fails the checks the daemon would apply.
    #[error("{0}")]
    Check(String),
    /// The operator did not consent, or could not be asked.
    #[error("{0}")]
    NoConsent(String),
    /// The request conflicts with what is installed.
    #[error("{0}")]
    Conflict(String),
    /// A local file could not be read or written.
    #[error("cannot {action} {}: {source}; {fix}", path.display())]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
        /// What to do about it.
        fix: &'static str,
    },
    /// A bad argument or setting.
    #[error("{0}")]
    Usage(String),
    /// A digest or reference that cannot be read.
    #[error(transparent)]
    Name(#[from] crate::reference::NameError),
}

impl SupplyError {
    /// A connection that failed or broke off, for no reason the client can name a fix for.
    pub(crate) fn connection(what: &str, problem: String) -> SupplyError {
        SupplyError::Connection {
            what: what.to_owned(),
            problem,
            fix: "Check that the registry is reachable and try again".into(),
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
        fix: &'static str,
    ) -> SupplyError {
        SupplyError::Io {
            action,
            path: path.into(),
            source,
            fix,
        }
    }
}

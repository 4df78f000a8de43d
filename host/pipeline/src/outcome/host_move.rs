//! Whether a reboot brought the VM back on another host, where IMDS tells it: the compute
//! metadata names the host only for a VM placed on an Azure Dedicated Host (`host.id`, since
//! api-version 2021-11-15). Everywhere else the host a Redeploy moves the VM to cannot be
//! seen from inside, and the record says so instead of guessing.

use serde::{Deserialize, Serialize};

/// What IMDS's compute metadata said of the host, as one run of the daemon read it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HostReading {
    /// The VM is on this dedicated host (`host.id`, an Azure resource id).
    Dedicated {
        /// `host.id`.
        id: String,
    },
    /// IMDS answered and named no host: the VM is not placed on a dedicated host.
    NotNamed,
    /// The compute metadata was not read (IMDS did not answer, or not yet).
    #[default]
    Unread,
}

/// Whether the VM came back on another host, from the host the run before the reboot read
/// and the host this run reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HostChange {
    /// IMDS names another dedicated host than before the reboot.
    Moved {
        /// `host.id` before the reboot.
        from: String,
        /// `host.id` after it.
        to: String,
    },
    /// IMDS names the same dedicated host as before the reboot.
    SameHost {
        /// `host.id`.
        id: String,
    },
    /// Nothing can be said; why, in words.
    NotTold {
        /// Why.
        why: String,
    },
}

impl HostChange {
    /// The change from `before` (the run before the reboot) to `after` (this run).
    pub fn between(before: &HostReading, after: &HostReading) -> HostChange {
        let not_told = |why: &str| HostChange::NotTold {
            why: why.to_owned(),
        };
        match (before, after) {
            (HostReading::Dedicated { id: from }, HostReading::Dedicated { id: to }) => {
                if from == to {
                    HostChange::SameHost { id: to.clone() }
                } else {
                    HostChange::Moved {
                        from: from.clone(),
                        to: to.clone(),
                    }
                }
            }
            (HostReading::Unread, _) => {
                not_told("the run before the reboot had not read IMDS's compute metadata")
            }
            (_, HostReading::Unread) => {
                not_told("IMDS's compute metadata could not be read after the reboot")
            }
            (HostReading::NotNamed, HostReading::NotNamed) => not_told(
                "IMDS names a host only for a VM on an Azure Dedicated Host (compute host.id); another host cannot be seen from inside this VM",
            ),
            (HostReading::NotNamed, HostReading::Dedicated { .. })
            | (HostReading::Dedicated { .. }, HostReading::NotNamed) => {
                not_told("IMDS named a dedicated host on one side of the reboot only")
            }
        }
    }

    /// Whether the VM came back on another host.
    pub fn moved(&self) -> bool {
        matches!(self, HostChange::Moved { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dedicated(id: &str) -> HostReading {
        HostReading::Dedicated { id: id.into() }
    }

    #[test]
    fn another_dedicated_host_is_a_move_and_the_same_one_is_not() {
        let moved = HostChange::between(&dedicated("h1"), &dedicated("h2"));
        assert_eq!(
            moved,
            HostChange::Moved {
                from: "h1".into(),
                to: "h2".into()
            }
        );
        assert!(moved.moved());
        let same = HostChange::between(&dedicated("h1"), &dedicated("h1"));
        assert_eq!(same, HostChange::SameHost { id: "h1".into() });
        assert!(!same.moved());
    }

    #[test]
    fn without_a_host_named_on_both_sides_nothing_is_said_and_why() {
        let table = [
            (
                HostReading::NotNamed,
                HostReading::NotNamed,
                "Dedicated Host",
            ),
            (HostReading::Unread, dedicated("h1"), "before the reboot"),
            (dedicated("h1"), HostReading::Unread, "after the reboot"),
            (HostReading::NotNamed, dedicated("h1"), "one side"),
        ];
        for (before, after, says) in table {
            let change = HostChange::between(&before, &after);
            let HostChange::NotTold { why } = &change else {
                panic!("{before:?} -> {after:?} gave {change:?}");
            };
            assert!(why.contains(says), "{why}");
        }
    }

    #[test]
    fn a_heartbeat_without_the_field_reads_as_unread() {
        #[derive(Deserialize)]
        struct Old {
            #[serde(default)]
            host: HostReading,
        }
        let old: Old = serde_json::from_str("{}").expect("an old heartbeat");
        assert_eq!(old.host, HostReading::Unread);
        let text = serde_json::to_string(&dedicated("h1")).expect("serialises");
        assert_eq!(text, r#"{"kind":"dedicated","id":"h1"}"#);
    }
}

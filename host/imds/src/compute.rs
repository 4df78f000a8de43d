//! The compute metadata (`/metadata/instance/compute`) forewarn reads: the VM's name, its
//! priority (Spot VMs can be evicted) and its eviction policy (Delete loses the disks).

use std::fmt;

use serde_json::{Map, Value};

use crate::wire::{self, excerpt};
use forewarn_events::ParseError;

/// What forewarn needs of the compute metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeInfo {
    /// `name`: the name IMDS puts in an event's `Resources`, e.g. "myvmss_2".
    pub name: String,
    /// `priority`; Regular when absent or empty (Azure leaves it empty on many regular VMs).
    pub priority: VmPriority,
    /// `evictionPolicy`; None when absent or empty (a VM that cannot be evicted).
    pub eviction_policy: Option<EvictionPolicy>,
    /// `resourceId`: the VM's Azure Resource Manager id
    /// (`/subscriptions/…/virtualMachines/NAME`, or `…/virtualMachineScaleSets/SET/virtualMachines/ID`);
    /// empty when absent.
    pub resource_id: String,
    /// `host.id`: the Azure Dedicated Host the VM runs on (since api-version 2021-11-15).
    /// None on a VM that is not placed on a dedicated host, the usual case: IMDS names no
    /// other host.
    pub dedicated_host: Option<String>,
}

/// `priority` of the compute metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmPriority {
    /// A regular VM (also an absent or empty `priority`).
    Regular,
    /// A Spot VM: Azure may evict it, announcing it with a Preempt event.
    Spot,
    /// A Low-priority scale-set VM (the older name of Spot).
    Low,
    /// Any other text, kept as sent.
    Other(String),
}

impl VmPriority {
    /// Reads IMDS's text, in any case; empty text is Regular.
    pub fn parse(text: &str) -> VmPriority {
        let text = text.trim();
        match text.to_ascii_lowercase().as_str() {
            "" | "regular" => VmPriority::Regular,
            "spot" => VmPriority::Spot,
            "low" => VmPriority::Low,
            _ => VmPriority::Other(text.to_string()),
        }
    }

    /// Whether Azure can evict such a VM (Spot and Low).
    pub fn is_evictable(&self) -> bool {
        matches!(self, VmPriority::Spot | VmPriority::Low)
    }
}

impl fmt::Display for VmPriority {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            VmPriority::Regular => "Regular",
            VmPriority::Spot => "Spot",
            VmPriority::Low => "Low",
            VmPriority::Other(text) => text,
        })
    }
}

/// `evictionPolicy` of the compute metadata: what an eviction does to the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Stopped and deallocated: the disks stay.
    Deallocate,
    /// Deleted with its disks: whatever must survive has to leave the VM first.
    Delete,
    /// Any other text, kept as sent.
    Other(String),
}

impl EvictionPolicy {
    /// Reads IMDS's text, in any case; empty text is no policy.
    pub fn parse(text: &str) -> Option<EvictionPolicy> {
        let text = text.trim();
        match text.to_ascii_lowercase().as_str() {
            "" => None,
            "deallocate" => Some(EvictionPolicy::Deallocate),
            "delete" => Some(EvictionPolicy::Delete),
            _ => Some(EvictionPolicy::Other(text.to_string())),
        }
    }
}

impl fmt::Display for EvictionPolicy {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            EvictionPolicy::Deallocate => "Deallocate",
            EvictionPolicy::Delete => "Delete",
            EvictionPolicy::Other(text) => text,
        })
    }
}

/// Reads the compute metadata JSON (field names in any case). A missing or empty `name`
/// is an error; `priority` and `evictionPolicy` are optional, and a value that is not a
/// string is kept as its JSON text in `Other`.
pub fn parse_compute(body: &str) -> Result<ComputeInfo, ParseError> {
    let missing = || ParseError::MissingField {
        field: "name",
        excerpt: excerpt(body),
    };
    let value = wire::parse_json(body)?;
    let object = value.as_object().ok_or_else(missing)?;
    let name = wire::field(object, "name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .ok_or_else(missing)?;
    Ok(ComputeInfo {
        name: name.to_string(),
        priority: VmPriority::parse(&text_of(object, "priority")),
        eviction_policy: EvictionPolicy::parse(&text_of(object, "evictionPolicy")),
        resource_id: text_of(object, "resourceId").trim().to_owned(),
        dedicated_host: dedicated_host_of(object),
    })
}

/// `host.id`, trimmed; None when absent, empty or not text.
fn dedicated_host_of(object: &Map<String, Value>) -> Option<String> {
    let host = wire::field(object, "host")?.as_object()?;
    let id = wire::field(host, "id")?.as_str()?.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// A field as text: a string as it is, null or absent as "", anything else as JSON.
fn text_of(object: &Map<String, Value>, name: &str) -> String {
    match wire::field(object, name) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(body: &str) -> ComputeInfo {
        parse_compute(body).unwrap_or_else(|error| panic!("{body}: {error}"))
    }

    #[test]
    fn priority_and_eviction_policy_table() {
        use EvictionPolicy::{Deallocate, Delete};
        use VmPriority::{Low, Other, Regular, Spot};
        let table: [(&str, VmPriority, Option<EvictionPolicy>); 9] = [
            (
                r#""priority":"Spot","evictionPolicy":"Delete""#,
                Spot,
                Some(Delete),
            ),
            (
                r#""priority":"spot","evictionPolicy":"deallocate""#,
                Spot,
                Some(Deallocate),
            ),
            (
                r#""priority":"Low","evictionPolicy":"Deallocate""#,
                Low,
                Some(Deallocate),
            ),
            (r#""priority":"Regular","evictionPolicy":"""#, Regular, None),
            (r#""priority":"","evictionPolicy":"""#, Regular, None),
            (r#""vmId":"x""#, Regular, None),
            (r#""priority":null,"evictionPolicy":null"#, Regular, None),
            (
                r#""PRIORITY":" Spot ","EvictionPolicy":"DELETE""#,
                Spot,
                Some(Delete),
            ),
            (
                r#""priority":"Premium","evictionPolicy":"Hibernate""#,
                Other("Premium".into()),
                Some(EvictionPolicy::Other("Hibernate".into())),
            ),
        ];
        for (fields, priority, policy) in table {
            let info = parsed(&format!(r#"{{"name":"vm-a",{fields}}}"#));
            assert_eq!(info.name, "vm-a", "{fields}");
            assert_eq!(info.priority, priority, "{fields}");
            assert_eq!(info.eviction_policy, policy, "{fields}");
        }
    }

    #[test]
    fn the_resource_id_is_read_when_sent() {
        let id =
            "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm-a";
        assert_eq!(
            parsed(&format!(r#"{{"name":"vm-a","resourceId":"{id}"}}"#)).resource_id,
            id
        );
        assert_eq!(parsed(r#"{"name":"vm-a"}"#).resource_id, "");
    }

    #[test]
    fn the_dedicated_host_is_read_when_imds_names_one() {
        let host =
            "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/hostGroups/hg/hosts/h1";
        let named = parsed(&format!(r#"{{"name":"vm-a","host":{{"id":" {host} "}}}}"#));
        assert_eq!(named.dedicated_host.as_deref(), Some(host));
        for body in [
            r#"{"name":"vm-a"}"#,
            r#"{"name":"vm-a","host":{"id":""}}"#,
            r#"{"name":"vm-a","host":{"id":null},"hostGroup":{"id":"hg"}}"#,
            r#"{"name":"vm-a","host":"h1"}"#,
        ] {
            assert_eq!(parsed(body).dedicated_host, None, "{body}");
        }
    }

    #[test]
    fn a_priority_that_is_not_text_is_kept_as_json() {
        let info = parsed(r#"{"name":"vm-a","priority":3}"#);
        assert_eq!(info.priority, VmPriority::Other("3".into()));
    }

    #[test]
    fn the_name_is_required() {
        assert_eq!(
            parsed(r#"{"location":"westeurope","name":"myvmss_2","vmId":"x"}"#).name,
            "myvmss_2"
        );
        for body in [r#"{"name":""}"#, r#"{"vmId":"x"}"#, "[]", "not json"] {
            assert!(parse_compute(body).is_err(), "{body}");
        }
    }

    #[test]
    fn only_spot_and_low_are_evictable() {
        assert!(VmPriority::Spot.is_evictable());
        assert!(VmPriority::Low.is_evictable());
        assert!(!VmPriority::Regular.is_evictable());
        assert!(!VmPriority::Other("Spotty".into()).is_evictable());
        assert_eq!(VmPriority::Other("X".into()).to_string(), "X");
        assert_eq!(EvictionPolicy::Delete.to_string(), "Delete");
    }
}

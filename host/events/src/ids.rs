//! The names forewarn keys its state by: an event's [`EventId`] and a plugin's
//! [`PluginName`]. Each is its own type so that one cannot stand in for the other (an
//! `(EventId, PluginName)` pair cannot be built the wrong way round), while reading,
//! comparing, hashing and serializing exactly as the text inside: JSON holds a plain string,
//! and a map keyed by either still answers `get(&str)`.
//!
//! ```compile_fail
//! use forewarn_events::{EventId, PluginName};
//! // A call in flight is (event, plugin): the halves cannot be swapped.
//! let call: (EventId, PluginName) = (PluginName::from("lb-drain"), EventId::from("E1"));
//! ```
//!
//! Neither dereferences to `str` (api-guidelines C-DEREF: a newtype is not a smart pointer),
//! so a function asking for an event's id takes `&EventId`, and a plugin's name given in its
//! place does not compile; the text is there when asked for, with `as_str()`:
//!
//! ```compile_fail
//! use forewarn_events::PluginName;
//! fn takes_text(text: &str) -> usize { text.len() }
//! takes_text(&PluginName::from("lb-drain"));
//! ```

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Defines a string newtype with the conversions every id shares.
macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        // `pad`, not `write_str`: a width (`{name:<18}`, the demo's columns) is honoured.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> $name {
                $name(text)
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> $name {
                $name(text.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(text: &String) -> $name {
                $name(text.clone())
            }
        }

        impl From<&$name> for $name {
            fn from(id: &$name) -> $name {
                id.clone()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

string_id! {
    /// IMDS's `EventId`: stable for an event's whole life, the key of everything forewarn
    /// keeps about the event. Compared exactly, as IMDS sends it.
    EventId
}

string_id! {
    /// A plugin's name (its package's name, the name of its directory in the drop-in
    /// directory): the key of its progress, health and key-value store.
    PluginName
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn an_id_reads_and_writes_as_the_plain_string() {
        let id: EventId = serde_json::from_str(r#""C7061BAC-AFDC""#).unwrap();
        assert_eq!(id, "C7061BAC-AFDC");
        assert_eq!(serde_json::to_string(&id).unwrap(), r#""C7061BAC-AFDC""#);
        let name = PluginName::from("lb-drain");
        assert_eq!(serde_json::to_string(&name).unwrap(), r#""lb-drain""#);
        assert_eq!(name.to_string(), "lb-drain");
        assert_eq!(
            format!("[{name:<10}]"),
            "[lb-drain  ]",
            "a width is honoured"
        );
    }

    #[test]
    fn maps_keyed_by_an_id_answer_a_str_in_str_order() {
        let mut events: BTreeMap<EventId, u32> = BTreeMap::new();
        events.insert("b".into(), 2);
        events.insert("B".into(), 1);
        events.insert("a".into(), 3);
        assert_eq!(events.get("b"), Some(&2));
        let keys: Vec<&str> = events.keys().map(EventId::as_str).collect();
        assert_eq!(keys, ["B", "a", "b"]);
    }
}

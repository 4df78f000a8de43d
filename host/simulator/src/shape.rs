//! The document's shape by api-version: which fields each Scheduled Events api-version
//! carries, and the `_` older versions put before VM names, applied to the rendered document.

use serde_json::Value;

/// The Scheduled Events api-versions the docs list, oldest first; others get IMDS's 400.
pub(crate) const SUPPORTED_API_VERSIONS: [&str; 7] = [
    "2017-03-01",
    "2017-08-01",
    "2017-11-01",
    "2019-01-01",
    "2019-04-01",
    "2019-08-01",
    "2020-07-01",
];

/// The first api-version without the `_` before IaaS VM names ("Removed prepended
/// underscore from resource names for IaaS VMs").
const NO_UNDERSCORE_SINCE: &str = "2017-08-01";
/// The first api-version with `Description`.
const DESCRIPTION_SINCE: &str = "2019-04-01";
/// The first api-version with `EventSource`.
const EVENT_SOURCE_SINCE: &str = "2019-08-01";
/// The first api-version with `DurationInSeconds`.
const DURATION_SINCE: &str = "2020-07-01";

/// The api-version whose shape a request gets: the older of what the client asked for and
/// the scenario's `shape` (api-versions are dates, so text order is time order).
pub(crate) fn served_version<'a>(requested: &'a str, scenario_shape: Option<&'a str>) -> &'a str {
    match scenario_shape {
        Some(shape) if shape < requested => shape,
        _ => requested,
    }
}

/// `document` (rendered in the 2020-07-01 shape) as `version` renders it: fields that
/// version does not have are left out (and the scenario's `omit`), and before 2017-08-01
/// each resource gets a `_`. Text that is not a JSON document is returned unchanged.
pub(crate) fn in_shape(document: &str, version: &str, omit: &[String]) -> String {
    let Ok(mut value) = serde_json::from_str::<Value>(document) else {
        return document.to_string();
    };
    let Some(events) = value.get_mut("Events").and_then(Value::as_array_mut) else {
        return document.to_string();
    };
    for event in events.iter_mut().filter_map(Value::as_object_mut) {
        let dropped = [
            ("Description", DESCRIPTION_SINCE),
            ("EventSource", EVENT_SOURCE_SINCE),
            ("DurationInSeconds", DURATION_SINCE),
        ];
        for (field, since) in dropped {
            if version < since {
                event.remove(field);
            }
        }
        for field in omit {
            event.remove(field);
        }
        if version < NO_UNDERSCORE_SINCE
            && let Some(resources) = event.get_mut("Resources").and_then(Value::as_array_mut)
        {
            for resource in resources.iter_mut() {
                if let Some(name) = resource.as_str() {
                    *resource = Value::String(format!("_{name}"));
                }
            }
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CURRENT: &str = r#"{"DocumentIncarnation":2,"Events":[{"EventId":"E","EventStatus":"Scheduled","EventType":"Reboot","ResourceType":"VirtualMachine","Resources":["vm-a"],"NotBefore":"Mon, 11 Apr 2022 22:26:58 GMT","Description":"d","EventSource":"Platform","DurationInSeconds":-1}]}"#;

    fn event(text: &str) -> serde_json::Map<String, Value> {
        let value: Value = serde_json::from_str(text).unwrap();
        value["Events"][0].as_object().unwrap().clone()
    }

    #[test]
    fn the_newest_version_is_unchanged() {
        assert_eq!(event(&in_shape(CURRENT, "2020-07-01", &[])), event(CURRENT));
    }

    #[test]
    fn fields_arrive_with_their_versions() {
        let keys = |version: &str| {
            let mut keys: Vec<String> = event(&in_shape(CURRENT, version, &[]))
                .keys()
                .cloned()
                .collect();
            keys.sort();
            keys.join(",")
        };
        let base = "EventId,EventStatus,EventType,NotBefore,ResourceType,Resources";
        assert_eq!(keys("2017-08-01"), base);
        assert_eq!(keys("2019-01-01"), base);
        assert!(keys("2019-04-01").contains("Description"));
        assert!(!keys("2019-04-01").contains("EventSource"));
        assert!(keys("2019-08-01").contains("EventSource"));
        assert!(!keys("2019-08-01").contains("DurationInSeconds"));
    }

    #[test]
    fn omitted_fields_are_left_out_of_every_event() {
        let omit = ["ResourceType".to_owned()];
        let trimmed = event(&in_shape(CURRENT, "2020-07-01", &omit));
        assert!(!trimmed.contains_key("ResourceType"));
        assert!(trimmed.contains_key("EventSource"));
    }

    #[test]
    fn only_2017_03_01_prefixes_names() {
        assert_eq!(
            event(&in_shape(CURRENT, "2017-03-01", &[]))["Resources"][0],
            "_vm-a"
        );
        assert_eq!(
            event(&in_shape(CURRENT, "2017-08-01", &[]))["Resources"][0],
            "vm-a"
        );
    }

    #[test]
    fn the_older_of_request_and_scenario_wins() {
        assert_eq!(
            served_version("2020-07-01", Some("2017-08-01")),
            "2017-08-01"
        );
        assert_eq!(
            served_version("2017-03-01", Some("2017-08-01")),
            "2017-03-01"
        );
        assert_eq!(served_version("2019-01-01", None), "2019-01-01");
    }
}

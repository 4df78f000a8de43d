//! The fully commented example configuration (`forewarn config example`), which is also
//! the default /etc/forewarn/forewarn.toml the .deb installs: every option at its default.

/// The example configuration text (packaging/forewarn.toml), with Linux's paths.
pub const CONFIG_EXAMPLE: &str = include_str!("../../../../packaging/forewarn.toml");

/// [`CONFIG_EXAMPLE`] with this platform's default paths: the text itself on Linux; on
/// Windows the config file, state and plugin directories under `%ProgramData%\forewarn`
/// (as TOML literal strings, so the backslashes stay as they are).
pub fn for_this_platform() -> String {
    use forewarn_platform::default_paths;
    let config_file = default_paths::config_file();
    let state_dir = default_paths::state_dir();
    let plugin_dir = default_paths::plugin_dir();
    let linux_config_file = "/etc/forewarn/forewarn.toml";
    if config_file.as_os_str() == linux_config_file {
        return CONFIG_EXAMPLE.to_owned();
    }
    CONFIG_EXAMPLE
        .replacen(linux_config_file, &config_file.display().to_string(), 1)
        .replacen(
            "state-dir = \"/var/lib/forewarn\"",
            &format!("state-dir = '{}'", state_dir.display()),
            1,
        )
        .replacen(
            "plugin-dir = \"/etc/forewarn/plugins.d\"",
            &format!("plugin-dir = '{}'", plugin_dir.display()),
            1,
        )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::config::Config;

    /// Dotted paths of every key in a TOML table.
    fn key_paths(value: &toml::Value, prefix: &str, out: &mut BTreeSet<String>) {
        let Some(table) = value.as_table() else {
            return;
        };
        for (key, child) in table {
            let path = format!("{prefix}{key}");
            if child.is_table() {
                key_paths(child, &format!("{path}."), out);
            } else {
                out.insert(path);
            }
        }
    }

    #[test]
    fn the_operations_guide_shows_the_example_verbatim() {
        let guide = include_str!("../../../../docs/operations.md");
        let block = format!("```toml\n{}```", CONFIG_EXAMPLE);
        assert!(
            guide.contains(&block),
            "docs/operations.md's configuration reference differs from packaging/forewarn.toml: paste `forewarn config example` into it"
        );
    }

    #[test]
    fn the_platforms_example_is_exactly_its_defaults() {
        let text = for_this_platform();
        assert_eq!(Config::parse(&text).unwrap(), Config::default());
    }

    /// Linux's defaults are the text's (Windows' are checked just above).
    // not on Windows: CONFIG_EXAMPLE holds Linux's paths; the_platforms_example_is_exactly_its_defaults checks Windows'
    #[cfg(unix)]
    #[test]
    fn example_is_exactly_the_defaults() {
        assert_eq!(Config::parse(CONFIG_EXAMPLE).unwrap(), Config::default());
    }

    #[test]
    fn example_lists_every_option() {
        let mut defaults = BTreeSet::new();
        key_paths(
            &toml::Value::try_from(Config::default()).unwrap(),
            "",
            &mut defaults,
        );
        let mut listed = BTreeSet::new();
        key_paths(&toml::from_str(CONFIG_EXAMPLE).unwrap(), "", &mut listed);
        assert_eq!(
            listed, defaults,
            "set every option in packaging/forewarn.toml"
        );
        // Options without a default value are documented as comments.
        for commented in [
            "# approve-freeze-shorter-than = ",
            "# [actions.",
            "# argv = ",
            "# timeout = ",
            "# [coordination]",
            "# endpoints = ",
            "# prefix = ",
            "# lease-ttl = ",
            "# username = ",
            "# password = ",
            "# allow-plaintext-credentials = ",
            "# ca-file = ",
            "# cert-file = ",
            "# key-file = ",
            "# dead-vm = ",
            "# deadline = ",
            "# phase-ordering-number = ",
        ] {
            assert!(
                CONFIG_EXAMPLE.contains(commented),
                "{commented} is not documented"
            );
        }
    }

    #[test]
    fn commented_examples_are_valid_when_uncommented() {
        let uncommented: String = CONFIG_EXAMPLE
            .lines()
            .map(|line| {
                let body = line.strip_prefix("# ").unwrap_or(line);
                let is_assignment = body.split_once(" = ").is_some_and(|(key, _)| {
                    key.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                });
                let is_toml = body.starts_with('[') || is_assignment;
                if is_toml { body } else { "" }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let config = Config::parse(&uncommented).unwrap();
        assert_eq!(config.policy.approve_freeze_shorter_than, Some(10));
        assert_eq!(
            config.actions["stop-app"].argv,
            ["systemctl", "stop", "app.service"]
        );
        let coordination = config.coordination.expect("the [coordination] example");
        assert_eq!(coordination.endpoints.len(), 2);
        assert_eq!(coordination.username.as_deref(), Some("forewarn"));
        assert_eq!(
            coordination.deadline,
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(config.scale_set.phase_ordering_number, Some(0));
    }
}

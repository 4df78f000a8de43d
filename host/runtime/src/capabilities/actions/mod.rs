//! Operator actions: `run-action` runs a command the operator defined in the daemon config
//! (`[actions.NAME]`, argv and timeout), never one the plugin names itself. Granted by
//! `actions = ["NAME"]` under `[capabilities]`; the command runs without a shell in its own
//! process group, which is killed at the action's timeout or the call's deadline.

pub(crate) mod runner;

use std::collections::BTreeMap;

pub use runner::ActionSpec;
pub(crate) use runner::run;

use super::log_text::describe;
use crate::call_state::{CallState, LOG_FIELD_MAX_BYTES, LOG_LINE_MAX_BYTES};
use crate::wit::latest::{ActionOutput, HostError};
use forewarn_events::log_safe;
use forewarn_manifest::Capabilities;

/// Ok when `plugin`'s grants name the action `name` (whether the daemon defines it is
/// [`defined`]'s question).
pub(crate) fn grant(plugin: &str, grants: &Capabilities, name: &str) -> Result<(), HostError> {
    if grants.actions.iter().any(|granted| granted == name) {
        return Ok(());
    }
    Err(HostError::NotGranted(format!(
        "plugin `{plugin}` may not run action `{name}`: add \"{name}\" to \
         [capabilities] actions in {plugin}.toml"
    )))
}

/// The daemon's definition of the granted action `name`. Err names the missing setting.
pub(crate) fn defined<'a>(
    plugin: &str,
    name: &str,
    definitions: &'a BTreeMap<String, ActionSpec>,
) -> Result<&'a ActionSpec, HostError> {
    definitions.get(name).ok_or_else(|| {
        HostError::Invalid(format!(
            "action `{name}` is granted to plugin `{plugin}` but not defined: add \
             [actions.{name}] with argv = [\"program\", \"arg\", …] to the daemon config"
        ))
    })
}

/// The host function `run-action`: the grant, the definition, then the command.
pub(crate) async fn run_action(
    call: &mut CallState,
    name: String,
) -> Result<ActionOutput, HostError> {
    call.not_while_preparing()?;
    let resolved = grant(&call.plugin, &call.settings.grants, &name)
        .and_then(|()| defined(&call.plugin, &name, &call.services.actions));
    let spec = match resolved {
        Ok(spec) => spec.clone(),
        Err(error) => {
            if call.take_log_line() {
                tracing::warn!(
                    plugin = %call.plugin,
                    action = %log_safe(&name, LOG_FIELD_MAX_BYTES),
                    error = %log_safe(&describe(&error), LOG_FIELD_MAX_BYTES),
                    "plugin action refused"
                );
            }
            return Err(error);
        }
    };
    tracing::info!(plugin = %call.plugin, action = %name, argv = %spec.argv.join(" "), "running action");
    let result = run(&spec, call.deadline).await;
    log_result(&call.plugin, &name, &result);
    result
}

fn log_result(plugin: &str, action: &str, result: &Result<ActionOutput, HostError>) {
    match result {
        Ok(output) => tracing::info!(
            plugin,
            action,
            exit_code = %output.exit_code.map_or_else(|| "killed by a signal".to_owned(), |code| code.to_string()),
            stdout = %log_safe(output.stdout.trim_end(), LOG_LINE_MAX_BYTES),
            stderr = %log_safe(output.stderr.trim_end(), LOG_LINE_MAX_BYTES),
            "action finished"
        ),
        Err(HostError::TimedOut) => tracing::warn!(
            plugin,
            action,
            "action killed: it ran past its timeout or the plugin's deadline"
        ),
        Err(error) => tracing::warn!(plugin, action, error = %describe(error), "action failed"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::capabilities::testing::{Expected, call, check_rows, grants};
    use crate::services::HostServices;

    #[test]
    fn actions_are_granted_by_name() {
        let granted = grants(true, &["127.0.0.1:80"], &["stop-app", "start-app"]);
        let rows = [
            (&granted, "stop-app", Expected::Granted),
            (&granted, "start-app", Expected::Granted),
            (
                &granted,
                "reboot-now",
                Expected::Refused(
                    "plugin `p` may not run action `reboot-now`: add \"reboot-now\" to \
                     [capabilities] actions in p.toml",
                ),
            ),
            (&granted, "Stop-App", Expected::Refused("Stop-App")),
        ];
        check_rows(&rows, |grants, action| grant("p", grants, action));
    }

    #[test]
    fn an_undefined_action_names_the_daemon_setting() {
        let definitions = BTreeMap::from([(
            "stop-app".to_owned(),
            ActionSpec {
                argv: vec!["true".to_owned()],
                timeout: Duration::ZERO,
            },
        )]);
        assert!(defined("p", "stop-app", &definitions).is_ok());
        let error = defined("p", "start-app", &definitions).unwrap_err();
        assert!(
            matches!(&error, HostError::Invalid(text) if text.contains("[actions.start-app]")),
            "{error:?}"
        );
    }

    /// A command that prints `hello`, as the platform spells it.
    #[cfg(unix)]
    const GREET: &[&str] = &["echo", "hello"];
    #[cfg(windows)]
    const GREET: &[&str] = &["cmd", "/C", "echo hello"];

    fn defining(name: &str, argv: &[&str]) -> HostServices {
        let spec = ActionSpec {
            argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
            timeout: Duration::from_secs(5),
        };
        HostServices {
            actions: Arc::new(BTreeMap::from([(name.to_owned(), spec)])),
            ..HostServices::default()
        }
    }

    #[tokio::test]
    async fn run_action_runs_only_a_granted_and_defined_action() {
        let services = defining("greet", GREET);
        let mut granted = call(
            grants(false, &[], &["greet", "undefined"]),
            services.clone(),
        );
        let output = run_action(&mut granted, "greet".into())
            .await
            .expect("granted and defined");
        assert_eq!(
            (output.exit_code, output.stdout.trim_end()),
            (Some(0), "hello")
        );

        let undefined = run_action(&mut granted, "undefined".into()).await;
        assert!(
            matches!(&undefined, Err(HostError::Invalid(message)) if message.contains("[actions.undefined]")),
            "{undefined:?}"
        );
        let mut refused = call(grants(false, &[], &[]), services);
        let answer = run_action(&mut refused, "greet".into()).await;
        assert!(
            matches!(answer, Err(HostError::NotGranted(_))),
            "{answer:?}"
        );
    }
}

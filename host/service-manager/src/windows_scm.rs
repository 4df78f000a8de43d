//! The Windows Service Control Manager: registering, starting, stopping and removing the
//! `forewarn` service (`forewarn service …`), and the service's side of it (`forewarn
//! service run`, which the SCM launches): status reports and the Stop, Shutdown and
//! Pre-shutdown controls.

use std::ffi::OsString;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use windows_service::service::{
    ServiceAccess, ServiceAction, ServiceActionType, ServiceControl, ServiceControlAccept,
    ServiceErrorControl, ServiceExitCode, ServiceFailureActions, ServiceFailureResetPeriod,
    ServiceInfo, ServiceStartType, ServiceState, ServiceStatus, ServiceType,
};
use windows_service::service_control_handler::{
    self, ServiceControlHandlerResult, ServiceStatusHandle,
};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};
use windows_service::{define_windows_service, service_dispatcher};

use super::preshutdown_relay::PreshutdownRelay;
use super::{InstallOptions, SERVICE_NAME, ServiceBody, ServiceError};

const DISPLAY_NAME: &str = "forewarn (Azure Scheduled Events)";
const DESCRIPTION: &str = "Prepares this VM for Azure maintenance (IMDS Scheduled Events) through \
    sandboxed WebAssembly plugins, and approves it early once every plugin is ready.";
/// How long the SCM is told a start may take: IMDS may need up to two minutes to answer
/// the first poll, and the service reports running only then.
const START_WAIT_HINT: Duration = Duration::from_secs(150);
/// How long the SCM is told a stop may take (plugins' recover calls, the journal).
const STOP_WAIT_HINT: Duration = Duration::from_secs(30);
/// How long Windows waits for the service at shutdown (pre-shutdown notification): the
/// plugins' last preparation gets `[shutdown] budget` of it, at most 55 s.
const PRESHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);
/// Restarts after a failure: after 5 s, 30 s, then 60 s; the count resets after a day.
const RESTART_DELAYS: [Duration; 3] = [
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(60),
];
const FAILURE_RESET: Duration = Duration::from_secs(24 * 60 * 60);
/// How long `forewarn service start|stop` waits for the state it asked for.
const CONTROL_WAIT: Duration = Duration::from_secs(180);

/// ERROR_ACCESS_DENIED, ERROR_SERVICE_DOES_NOT_EXIST, ERROR_SERVICE_EXISTS,
/// ERROR_SERVICE_MARKED_FOR_DELETE, ERROR_SERVICE_ALREADY_RUNNING, ERROR_SERVICE_NOT_ACTIVE.
const ACCESS_DENIED: i32 = 5;
const DOES_NOT_EXIST: i32 = 1060;
const EXISTS: i32 = 1073;
const MARKED_FOR_DELETE: i32 = 1072;
const ALREADY_RUNNING: i32 = 1056;
const NOT_ACTIVE: i32 = 1062;

/// The status handle, once `service_main` has registered the control handler; readiness
/// and stopping are reported through it (nothing when forewarn runs from a console).
static STATUS: OnceLock<ServiceStatusHandle> = OnceLock::new();
/// The body `run_dispatcher` was given, taken by `service_main`.
static BODY: Mutex<Option<ServiceBody>> = Mutex::new(None);

fn refused(action: &'static str, error: windows_service::Error) -> ServiceError {
    let code = match &error {
        windows_service::Error::Winapi(io) => io.raw_os_error(),
        _ => None,
    };
    let fix = match code {
        Some(ACCESS_DENIED) => "run it from an elevated prompt (Run as administrator)".to_owned(),
        Some(DOES_NOT_EXIST) => "install the service first: `forewarn service install`".to_owned(),
        Some(EXISTS) => "it is installed already: `forewarn service start`, or `forewarn service uninstall` to register it anew".to_owned(),
        Some(MARKED_FOR_DELETE) => "close the Services console (services.msc) and any `sc` session holding it, then try again".to_owned(),
        _ => format!("see `sc query {SERVICE_NAME}` and the log under %ProgramData%\\forewarn\\logs"),
    };
    ServiceError::Refused {
        action,
        message: error.to_string()
            + &code
                .map(|code| format!(" (error {code})"))
                .unwrap_or_default(),
        fix,
    }
}

fn manager(access: ServiceManagerAccess) -> Result<ServiceManager, ServiceError> {
    ServiceManager::local_computer(None::<&str>, access)
        .map_err(|error| refused("reach the Service Control Manager for", error))
}

pub(super) fn install(options: &InstallOptions) -> Result<(), ServiceError> {
    let manager = manager(ServiceManagerAccess::CONNECT | ServiceManagerAccess::CREATE_SERVICE)?;
    let info = ServiceInfo {
        name: SERVICE_NAME.into(),
        display_name: DISPLAY_NAME.into(),
        service_type: ServiceType::OWN_PROCESS,
        start_type: ServiceStartType::AutoStart,
        error_control: ServiceErrorControl::Normal,
        executable_path: options.executable.clone(),
        launch_arguments: launch_arguments(options),
        dependencies: Vec::new(),
        account_name: options.account.clone().map(OsString::from),
        account_password: options.password.clone().map(OsString::from),
    };
    let service = manager
        .create_service(&info, ServiceAccess::CHANGE_CONFIG | ServiceAccess::START)
        .map_err(|error| refused("install", error))?;
    // The service is registered: what follows refines it. A step the system refuses is
    // said with the `sc` command that does it, and the install still succeeds.
    let recovery = ServiceFailureActions {
        reset_period: ServiceFailureResetPeriod::After(FAILURE_RESET),
        reboot_msg: None,
        command: None,
        actions: Some(
            RESTART_DELAYS
                .iter()
                .map(|delay| ServiceAction {
                    action_type: ServiceActionType::Restart,
                    delay: *delay,
                })
                .collect(),
        ),
    };
    let steps: [(&str, String, windows_service::Result<()>); 4] = [
        (
            "its description",
            format!("sc description {SERVICE_NAME} \"{DESCRIPTION}\""),
            service.set_description(DESCRIPTION),
        ),
        (
            "its recovery actions (restart after 5 s, 30 s, 60 s)",
            format!(
                "sc failure {SERVICE_NAME} reset= 86400 actions= restart/5000/restart/30000/restart/60000"
            ),
            service.update_failure_actions(recovery),
        ),
        (
            "restarts after an error exit too",
            format!("sc failureflag {SERVICE_NAME} 1"),
            service.set_failure_actions_on_non_crash_failures(true),
        ),
        (
            "its pre-shutdown time (60 s)",
            format!("sc config {SERVICE_NAME} (or the registry value PreshutdownTimeout = 60000)"),
            service.set_preshutdown_timeout(PRESHUTDOWN_TIMEOUT),
        ),
    ];
    for (what, command, result) in steps {
        if let Err(error) = result {
            eprintln!(
                "forewarn: the service is installed, but Windows refused to set {what}: {error}. Set it with `{command}`"
            );
        }
    }
    Ok(())
}

/// `[--log-format json] service run --config CONFIG`.
fn launch_arguments(options: &InstallOptions) -> Vec<OsString> {
    let mut arguments: Vec<OsString> = Vec::new();
    if options.json_log {
        arguments.extend(["--log-format".into(), "json".into()]);
    }
    arguments.extend([
        "service".into(),
        "run".into(),
        "--config".into(),
        options.config.clone().into_os_string(),
    ]);
    arguments
}

pub(super) fn uninstall() -> Result<(), ServiceError> {
    let manager = manager(ServiceManagerAccess::CONNECT)?;
    let service = manager
        .open_service(
            SERVICE_NAME,
            ServiceAccess::QUERY_STATUS | ServiceAccess::STOP | ServiceAccess::DELETE,
        )
        .map_err(|error| refused("open", error))?;
    let status = service
        .query_status()
        .map_err(|error| refused("query", error))?;
    if status.current_state != ServiceState::Stopped {
        stop_and_wait(&service)?;
    }
    service.delete().map_err(|error| refused("remove", error))
}

pub(super) fn start() -> Result<(), ServiceError> {
    let manager = manager(ServiceManagerAccess::CONNECT)?;
    let service = manager
        .open_service(
            SERVICE_NAME,
            ServiceAccess::QUERY_STATUS | ServiceAccess::START,
        )
        .map_err(|error| refused("open", error))?;
    match service.start::<&str>(&[]) {
        Ok(()) => {}
        Err(windows_service::Error::Winapi(io)) if io.raw_os_error() == Some(ALREADY_RUNNING) => {
            return Ok(());
        }
        Err(error) => return Err(refused("start", error)),
    }
    wait_for(&service, ServiceState::Running, "start")
}

pub(super) fn stop() -> Result<(), ServiceError> {
    let manager = manager(ServiceManagerAccess::CONNECT)?;
    let service = manager
        .open_service(
            SERVICE_NAME,
            ServiceAccess::QUERY_STATUS | ServiceAccess::STOP,
        )
        .map_err(|error| refused("open", error))?;
    stop_and_wait(&service)
}

fn stop_and_wait(service: &windows_service::service::Service) -> Result<(), ServiceError> {
    match service.stop() {
        Ok(_) => {}
        Err(windows_service::Error::Winapi(io)) if io.raw_os_error() == Some(NOT_ACTIVE) => {
            return Ok(());
        }
        Err(error) => return Err(refused("stop", error)),
    }
    wait_for(service, ServiceState::Stopped, "stop")
}

/// Polls the service's state until it is `wanted`; a service that stops while starting
/// failed (its log says why).
fn wait_for(
    service: &windows_service::service::Service,
    wanted: ServiceState,
    what: &'static str,
) -> Result<(), ServiceError> {
    let started = Instant::now();
    loop {
        let status = service
            .query_status()
            .map_err(|error| refused("query", error))?;
        if status.current_state == wanted {
            return Ok(());
        }
        let gave_up =
            status.current_state == ServiceState::Stopped && wanted == ServiceState::Running;
        if gave_up || started.elapsed() >= CONTROL_WAIT {
            return Err(ServiceError::NotReached {
                what,
                waited_s: started.elapsed().as_secs(),
                state: format!("{:?}, exit code {:?}", status.current_state, status.exit_code),
                fix: "read the log under %ProgramData%\\forewarn\\logs, and `forewarn config check` the config".to_owned(),
            });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub(super) fn run_dispatcher(body: ServiceBody) -> Result<(), ServiceError> {
    *BODY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(body);
    service_dispatcher::start(SERVICE_NAME, ffi_service_main)
        .map_err(|error| refused("run as", error))
}

define_windows_service!(ffi_service_main, service_main);

/// Called by the SCM on its own thread: registers the control handler, runs the body
/// until a Stop, Shutdown or Pre-shutdown control, and reports the exit.
fn service_main(_arguments: Vec<OsString>) {
    let Some(body) = BODY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
    else {
        return;
    };
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let handler = move |control| match control {
        ServiceControl::Preshutdown if held_for_the_plugins(&stop) => {
            ServiceControlHandlerResult::NoError
        }
        ServiceControl::Stop | ServiceControl::Shutdown | ServiceControl::Preshutdown => {
            tracing::info!(control = ?control, "the Service Control Manager asks forewarn to stop");
            stopping();
            stop.cancel();
            ServiceControlHandlerResult::NoError
        }
        ServiceControl::Interrogate => ServiceControlHandlerResult::NoError,
        _ => ServiceControlHandlerResult::NotImplemented,
    };
    let handle = match service_control_handler::register(SERVICE_NAME, handler) {
        Ok(handle) => handle,
        Err(error) => {
            tracing::error!(%error, "cannot register with the Service Control Manager");
            return;
        }
    };
    let handle = *STATUS.get_or_init(|| handle);
    // Stop is accepted while the daemon waits for IMDS's first answer too.
    report(
        handle,
        ServiceState::StartPending,
        stop_controls(),
        START_WAIT_HINT,
        ServiceExitCode::Win32(0),
    );
    let exit = match body(shutdown) {
        Ok(()) => ServiceExitCode::Win32(0),
        Err(error) => {
            tracing::error!("forewarn stopped with an error: {error:#}");
            ServiceExitCode::ServiceSpecific(1)
        }
    };
    report(
        handle,
        ServiceState::Stopped,
        ServiceControlAccept::empty(),
        Duration::ZERO,
        exit,
    );
}

fn report(
    handle: ServiceStatusHandle,
    state: ServiceState,
    accepted: ServiceControlAccept,
    wait_hint: Duration,
    exit_code: ServiceExitCode,
) {
    let status = ServiceStatus {
        service_type: ServiceType::OWN_PROCESS,
        current_state: state,
        controls_accepted: accepted,
        exit_code,
        checkpoint: 0,
        wait_hint,
        process_id: None,
    };
    if let Err(error) = handle.set_service_status(status) {
        tracing::warn!(%error, ?state, "cannot report the service's state to the Service Control Manager");
    }
}

/// The daemon is up: running, and accepting Stop, Shutdown and Pre-shutdown.
pub(super) fn ready() {
    if let Some(handle) = STATUS.get() {
        report(
            *handle,
            ServiceState::Running,
            stop_controls(),
            Duration::ZERO,
            ServiceExitCode::Win32(0),
        );
    }
}

fn stop_controls() -> ServiceControlAccept {
    ServiceControlAccept::STOP | ServiceControlAccept::SHUTDOWN | ServiceControlAccept::PRESHUTDOWN
}

/// The daemon is stopping.
pub(super) fn stopping() {
    if let Some(handle) = STATUS.get() {
        report(
            *handle,
            ServiceState::StopPending,
            ServiceControlAccept::empty(),
            STOP_WAIT_HINT,
            ServiceExitCode::Win32(0),
        );
    }
}

/// Where the pre-shutdown notification goes while the daemon holds shutdowns back for the
/// plugins (`[shutdown] prepare`); taken by the first one.
static PRESHUTDOWN: Mutex<Option<PreshutdownRelay>> = Mutex::new(None);

/// A pre-shutdown, handed to the daemon when it holds shutdowns back: the service reports
/// stop-pending for the budget and stops once the plugins are prepared (the relay cancels
/// `stop`). False: nothing holds it, stop at once.
fn held_for_the_plugins(stop: &CancellationToken) -> bool {
    let relay = PRESHUTDOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let Some(budget) = relay.and_then(|relay| relay.shutdown_coming(stop.clone())) else {
        return false;
    };
    tracing::info!(
        budget_ms = forewarn_imds::millis(budget),
        "the Service Control Manager says Windows is shutting down: the plugins prepare before forewarn stops"
    );
    if let Some(handle) = STATUS.get() {
        report(
            *handle,
            ServiceState::StopPending,
            ServiceControlAccept::empty(),
            budget + STOP_WAIT_HINT,
            ServiceExitCode::Win32(0),
        );
    }
    true
}

/// The service's pre-shutdown notification, relayed to the daemon until `stop`: Windows
/// waits for the plugins' last preparation, up to the `PreshutdownTimeout` that `forewarn
/// service install` sets. Nothing from a console (`forewarn run`): no SCM sends it.
pub(super) fn spawn_shutdown_watch(
    budget: Duration,
    stop: CancellationToken,
) -> Option<super::ShutdownWatch> {
    STATUS.get()?;
    let (relay, watch) = PreshutdownRelay::spawn(budget, PRESHUTDOWN_TIMEOUT, stop);
    *PRESHUTDOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(relay);
    Some(watch)
}

/// The SCM has no watchdog.
pub(super) fn watchdog_interval() -> Option<Duration> {
    None
}

pub(super) fn watchdog_ping() {}

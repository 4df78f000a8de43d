//! How the daemon learns which VM it runs on ([`resolve_vm`]), against the IMDS simulator on
//! a free port: the name and priority IMDS gives, a configured name kept, and what the
//! operator is told when IMDS never answers. Asserted on what `resolve_vm` returns and on the
//! `startup` problem `/readyz` and `forewarn status` show.

use forewarn_runtime::wit::latest::EvictionPolicy;
use forewarn_simulator::{Scenario, SimulatorConfig, SimulatorHandle};

use super::*;

/// A Spot VM's scenario (a Preempt is listed, so the simulator's VMs are Spot, evicted by
/// deletion) with two VMs.
async fn spot_simulator() -> SimulatorHandle {
    let scenario = Scenario::from_toml(
        "name = \"spot\"\nvms = [\"vm-a\", \"vm-b\"]\n\n[[events]]\ntype = \"Preempt\"\nappear_at = \"1h\"\n",
        "spot.toml",
    )
    .expect("the test's scenario is valid");
    forewarn_simulator::spawn(SimulatorConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        scenario,
        speed: 1.0,
    })
    .await
    .expect("the simulator starts")
}

/// An address on which nothing listens (a port bound, then let go).
fn closed_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = listener.local_addr().expect("its address");
    format!("http://{address}")
}

fn config(url: String, vm_name: &str) -> Config {
    let mut config = Config {
        vm_name: vm_name.to_owned(),
        ..Config::default()
    };
    config.imds.url = url;
    config
}

async fn resolve(config: &Config) -> (anyhow::Result<ResolvedVm>, Option<String>) {
    let client = imds_client(config).expect("the client builds");
    let (startup, startup_rx) = watch::channel(Some("not resolved yet".to_owned()));
    let resolved = resolve_vm(config, &client, &startup, &CancellationToken::new()).await;
    let problem = startup_rx.borrow().clone();
    (resolved, problem)
}

fn spot() -> VmInfo {
    VmInfo {
        priority: VmPriority::Spot,
        eviction_policy: Some(EvictionPolicy::Delete),
    }
}

#[tokio::test]
async fn without_a_configured_name_the_name_and_priority_come_from_imds() {
    let simulator = spot_simulator().await;
    let config = config(simulator.vm_base_url("vm-b"), "");
    let (resolved, problem) = resolve(&config).await;
    let ResolvedVm { name, vm, host } = resolved.expect("IMDS answers");
    assert_eq!(
        host,
        HostReading::NotNamed,
        "the simulator's VM is on no dedicated host"
    );
    assert_eq!(name, "vm-b");
    assert_eq!(vm, spot());
    assert_eq!(problem, None, "a name from IMDS clears the startup problem");
}

#[tokio::test]
async fn a_configured_name_is_kept_and_the_priority_still_asked_of_imds() {
    let simulator = spot_simulator().await;
    // IMDS names this VM vm-b: the configured name wins (and the mismatch is logged).
    let config = config(simulator.vm_base_url("vm-b"), "vm-a");
    let (resolved, _) = resolve(&config).await;
    let ResolvedVm { name, vm, .. } = resolved.expect("a configured name needs no IMDS");
    assert_eq!(name, "vm-a");
    assert_eq!(vm, spot());
}

#[tokio::test]
async fn a_configured_name_without_imds_is_a_vm_of_unknown_priority() {
    let config = config(closed_url(), "vm-a");
    let (resolved, _) = resolve(&config).await;
    let ResolvedVm { name, vm, host } = resolved.expect("a configured name needs no IMDS");
    assert_eq!(name, "vm-a");
    assert_eq!(host, HostReading::Unread);
    assert_eq!(
        vm,
        VmInfo {
            priority: VmPriority::Unknown,
            eviction_policy: None,
        }
    );
}

#[tokio::test]
async fn without_a_name_or_imds_it_says_what_to_set_and_stops_at_shutdown() {
    let url = closed_url();
    let mut config = config(url.clone(), "");
    config.imds.vm_name_patience = Duration::ZERO;
    let client = imds_client(&config).expect("the client builds");
    let (startup, mut startup_rx) = watch::channel(None);
    let shutdown = CancellationToken::new();
    let resolving = {
        let (config, client, shutdown) = (config.clone(), client.clone(), shutdown.clone());
        tokio::spawn(async move { resolve_vm(&config, &client, &startup, &shutdown).await })
    };
    let problem = startup_rx
        .wait_for(Option::is_some)
        .await
        .expect("resolve_vm keeps the sender")
        .clone()
        .expect("waited for it");
    assert!(problem.contains("set `vm-name = \"NAME\"`"), "{problem}");
    assert!(
        problem.contains(&format!("{url}/metadata/instance/compute/name")),
        "{problem}"
    );
    shutdown.cancel();
    let error = resolving
        .await
        .expect("the task ends")
        .expect_err("no name was known");
    assert!(
        error
            .to_string()
            .contains("stopped before this VM's name was known"),
        "{error}"
    );
}

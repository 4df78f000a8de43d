//! `forewarn drill spot-eviction | reboot | redeploy`: rehearses maintenance for real. Asks
//! Azure Resource Manager, with the VM's managed identity and the resource id IMDS gives, to
//! simulate the eviction of this Spot VM, restart it or redeploy it; Azure then announces the
//! matching Scheduled Event, which the running daemon and its plugins handle as they would
//! the real thing. The drill says exactly what will happen and asks first (or `--yes`), then
//! follows the event through the daemon's outcome records and prints the record at the end.

use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_arm::{ARM_ENDPOINT, ARM_RESOURCE, ArmClient, ArmError, VmAction};
use forewarn_imds::{
    ClientConfig, ComputeInfo, EventType, EvictionPolicy, IdentityError, ImdsClient,
};

use crate::cli::outcome_records::{fetch_records, render_record};
use crate::cli::status_command::DaemonArgs;
use forewarn_pipeline::outcome::record::{OutcomeRecord, RecordStage};

/// How often the daemon's outcome records are read while the drill follows the event.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// What to rehearse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DrillKind {
    /// A Spot eviction (`simulateEviction`): a Preempt with 30 s notice, then the VM is
    /// evicted (deallocated or deleted, by its eviction policy). Spot VMs only.
    SpotEviction,
    /// A restart (`restart`): a User Reboot with up to 15 minutes' notice.
    Reboot,
    /// A redeploy (`redeploy`): a User Redeploy with up to 10 minutes' notice; the VM moves
    /// to another host and its temporary disk is lost.
    Redeploy,
}

impl DrillKind {
    fn action(self) -> VmAction {
        match self {
            DrillKind::SpotEviction => VmAction::SimulateEviction,
            DrillKind::Reboot => VmAction::Restart,
            DrillKind::Redeploy => VmAction::Redeploy,
        }
    }

    /// The Scheduled Event Azure announces for it.
    fn event_type(self) -> EventType {
        match self {
            DrillKind::SpotEviction => EventType::Preempt,
            DrillKind::Reboot => EventType::Reboot,
            DrillKind::Redeploy => EventType::Redeploy,
        }
    }

    /// What will happen to the VM, in words.
    fn what_happens(self, compute: &ComputeInfo) -> String {
        match self {
            DrillKind::SpotEviction => {
                let after = match &compute.eviction_policy {
                    Some(EvictionPolicy::Deallocate) => "deallocated (its eviction policy; start it again later)".into(),
                    Some(EvictionPolicy::Delete) => "deleted with its disks (its eviction policy)".into(),
                    Some(EvictionPolicy::Other(policy)) => format!("evicted ({policy}, its eviction policy)"),
                    None => "evicted".to_owned(),
                };
                format!(
                    "Azure evicts this Spot VM as it would for capacity: IMDS announces a Preempt with about 30 s notice, forewarn's plugins prepare and approve it, then the VM is {after} and stops running"
                )
            }
            DrillKind::Reboot => "Azure restarts this VM: IMDS announces a User Reboot (up to 15 minutes' notice), forewarn's plugins prepare and approve it, then the VM reboots (the daemon starts again after it and measures the downtime)".into(),
            DrillKind::Redeploy => "Azure moves this VM to another host: IMDS announces a User Redeploy (up to 10 minutes' notice), forewarn's plugins prepare and approve it, then the VM is shut down, moved and started again; the temporary disk's data is lost".into(),
        }
    }
}

/// `forewarn drill`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to rehearse.
    kind: DrillKind,
    /// Go on without asking (for scripts).
    #[arg(long)]
    yes: bool,
    /// IMDS's base URL. Default: `imds.url` from the config file (http://169.254.169.254).
    #[arg(long, value_name = "URL")]
    imds_url: Option<String>,
    /// Azure Resource Manager's endpoint (another cloud's, or `forewarn simulate`'s
    /// address to rehearse the drill itself).
    #[arg(long, value_name = "URL", default_value = ARM_ENDPOINT)]
    arm_url: String,
    /// How long to follow the event before giving up (its record stays on the daemon).
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Runs the drill: checks, asks, calls Resource Manager, follows the event to its record.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.daemon.config()?;
    let imds_url = args.imds_url.clone().unwrap_or(config.imds.url.clone());
    let imds = ImdsClient::new(ClientConfig {
        base_url: imds_url.trim_end_matches('/').to_owned(),
        ..ClientConfig::default()
    })
    .map_err(|error| anyhow::anyhow!("cannot build the IMDS client: {}", error.0))?;
    let compute = imds.fetch_compute().await.with_context(|| {
        format!("cannot read this VM's compute metadata from IMDS at {imds_url}: a drill runs on the Azure VM it rehearses (pass --imds-url for another address)")
    })?;
    check_drillable(args.kind, &compute)?;
    let before = known_events(&args.daemon).await?;
    print_plan(&args, &compute);
    if !args.yes {
        confirm()?;
    }
    let client_id = Some(config.identity.client_id.as_str()).filter(|id| !id.is_empty());
    let token = imds
        .fetch_identity_token(ARM_RESOURCE, client_id)
        .await
        .map_err(explain_identity)?;
    let arm = ArmClient::new(&args.arm_url)?;
    let action = args.kind.action();
    let status = arm
        .post_action(&compute.resource_id, action, &token.access_token)
        .await
        .map_err(|error| explain_arm(error, action, &compute.resource_id))?;
    println!(
        "Azure Resource Manager accepted {} ({status}); waiting for IMDS to announce the {} …",
        action.path(),
        args.kind.event_type()
    );
    follow(&args, &before).await
}

/// Refuses a drill that cannot happen on this VM, saying which can.
fn check_drillable(kind: DrillKind, compute: &ComputeInfo) -> anyhow::Result<()> {
    if compute.resource_id.is_empty() {
        bail!(
            "IMDS's compute metadata names no resourceId for this VM, so Azure Resource Manager cannot be asked: is it an Azure VM (IMDS api-version 2019-06-01 or later)?"
        );
    }
    if kind == DrillKind::SpotEviction && !compute.priority.is_evictable() {
        bail!(
            "{} is a {} VM: only Spot VMs can be evicted. Rehearse `forewarn drill reboot` or `forewarn drill redeploy` instead",
            compute.name,
            compute.priority
        );
    }
    Ok(())
}

/// The events the daemon has records of now (the drill's event is the new one).
async fn known_events(daemon: &DaemonArgs) -> anyhow::Result<BTreeSet<String>> {
    let view = fetch_records(daemon)
        .await
        .context("a drill follows its event through the running daemon: start it first (`systemctl start forewarn`)")?;
    Ok(view
        .records
        .iter()
        .map(|record| record.event_id.as_str().to_owned())
        .collect())
}

fn print_plan(args: &Args, compute: &ComputeInfo) {
    let action = args.kind.action();
    println!("Drill: {}", args.kind.what_happens(compute));
    println!("  VM:        {} ({})", compute.name, compute.resource_id);
    println!(
        "  call:      POST {}",
        ArmClient::new(&args.arm_url)
            .map(|arm| arm.action_url(&compute.resource_id, action))
            .unwrap_or_default()
    );
    println!(
        "  identity:  the VM's managed identity; it needs {} on the VM",
        action.permission(&compute.resource_id)
    );
    println!(
        "  then:      this command follows the {} through the daemon and prints its outcome record",
        args.kind.event_type()
    );
}

/// Asks on the terminal; anything but "yes" stops the drill before Azure is asked.
fn confirm() -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() {
        bail!("no terminal to confirm the drill on: pass --yes to run it anyway");
    }
    print!("This is the real thing for this VM. Type yes to go on: ");
    std::io::stdout().flush().ok();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    if answer.trim() != "yes" {
        bail!("not confirmed: nothing was asked of Azure");
    }
    Ok(())
}

/// The identity's refusal, with the fix.
fn explain_identity(error: IdentityError) -> anyhow::Error {
    match &error {
        IdentityError::Refused(refusal) if refusal.description.contains("Identity not found") => {
            anyhow::anyhow!(
                "this VM has no managed identity (IMDS: \"{}\"), so it cannot ask Azure Resource Manager for anything: assign one (`az vm identity assign -g GROUP -n VM`) and give it a role on the VM that allows the drill (e.g. Virtual Machine Contributor); with a user-assigned identity, set `identity.client-id` in the config",
                refusal.description
            )
        }
        _ => anyhow::anyhow!("cannot get a token for Azure Resource Manager from IMDS: {error}"),
    }
}

/// Resource Manager's refusal, with the fix.
fn explain_arm(error: ArmError, action: VmAction, resource_id: &str) -> anyhow::Error {
    match error.status() {
        Some(403) => anyhow::anyhow!(
            "{error}. The VM's managed identity may not {} this VM: give it a role with `{}` on it, e.g. `az role assignment create --assignee PRINCIPAL_ID --role \"Virtual Machine Contributor\" --scope {resource_id}`",
            action.path(),
            action.permission(resource_id)
        ),
        Some(401) => anyhow::anyhow!(
            "{error}. The managed identity's token was not accepted: check the identity (`identity.client-id`) and that the VM's clock is right"
        ),
        _ => anyhow::anyhow!("{error}"),
    }
}

/// Follows the drill's event (the first new record of its type) until its record is
/// finished, printing each stage once; then the record.
async fn follow(args: &Args, before: &BTreeSet<String>) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let wanted = args.kind.event_type();
    let mut said: Option<RecordStage> = None;
    let mut drill_event: Option<String> = None;
    loop {
        let view = match fetch_records(&args.daemon).await {
            Ok(view) => view,
            Err(error) => return Ok(went_down(&error, drill_event.as_deref(), wanted)),
        };
        if let Some(record) = drill_record(&view.records, before, wanted) {
            drill_event.get_or_insert_with(|| record.event_id.as_str().to_owned());
            if said != Some(record.stage) {
                say_stage(record, said.is_none());
                said = Some(record.stage);
            }
            if record.stage.is_finished() {
                print_record(args, record)?;
                return Ok(ExitCode::SUCCESS);
            }
        }
        if started.elapsed() > args.timeout {
            bail!(
                "the drill's {wanted} was not over within {} (the daemon keeps its record: `forewarn events list`)",
                humantime::format_duration(args.timeout)
            );
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

/// The daemon stopped answering after Azure accepted the call: the VM going down takes the
/// daemon with it, so the drill ends there, saying where the record will be.
fn went_down(error: &anyhow::Error, event_id: Option<&str>, wanted: EventType) -> ExitCode {
    let later = match event_id {
        Some(id) => format!("`forewarn events show {id}` prints the record"),
        None => format!("`forewarn events list` shows the {wanted}'s record"),
    };
    println!(
        "the daemon stopped answering ({error:#}): the VM is going down for the {wanted}. Once it is back, {later}"
    );
    ExitCode::SUCCESS
}

/// The newest record of type `wanted` that was not there before the drill.
fn drill_record<'a>(
    records: &'a [OutcomeRecord],
    before: &BTreeSet<String>,
    wanted: EventType,
) -> Option<&'a OutcomeRecord> {
    records
        .iter()
        .rev()
        .find(|record| record.event_type == wanted && !before.contains(record.event_id.as_str()))
}

fn say_stage(record: &OutcomeRecord, first: bool) {
    if first {
        println!(
            "IMDS announced {} {}; the daemon is handling it (on a real VM this command ends with the VM: once it is back, `forewarn events show {}` prints the record)",
            record.event_type,
            record.event_id.as_str(),
            record.event_id.as_str()
        );
    }
    let stage = match record.stage {
        RecordStage::Announced => "announced",
        RecordStage::Started => "started",
        RecordStage::Ended => "ended: plugins recover",
        RecordStage::Canceled => "canceled before it started",
        RecordStage::Finished { .. } => "finished",
    };
    println!("  {}: {stage}", record.event_id.as_str());
}

fn print_record(args: &Args, record: &OutcomeRecord) -> anyhow::Result<()> {
    match args.daemon.json {
        true => println!("{}", serde_json::to_string_pretty(record)?),
        false => print!("{}", render_record(record)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};
    use forewarn_imds::VmPriority;

    fn compute(priority: VmPriority, resource_id: &str) -> ComputeInfo {
        ComputeInfo {
            name: "vm-a".into(),
            priority,
            eviction_policy: None,
            resource_id: resource_id.into(),
            dedicated_host: None,
        }
    }

    #[test]
    fn takes_the_kind_and_refuses_others() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&["spot-eviction", "--yes", "--arm-url", "http://127.0.0.1:1"])
            .expect("parses");
        assert_eq!(args.kind, DrillKind::SpotEviction);
        assert!(args.yes);
        assert_eq!(
            parse::<Args>(&["reboot"]).expect("parses").arm_url,
            ARM_ENDPOINT
        );
        assert!(
            parse::<Args>(&["freeze"]).is_err(),
            "Azure has no Freeze to ask for"
        );
    }

    #[test]
    fn a_regular_vm_is_not_evicted_and_a_vm_without_resource_id_not_drilled() {
        let id =
            "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm-a";
        let error = check_drillable(DrillKind::SpotEviction, &compute(VmPriority::Regular, id))
            .expect_err("a regular VM");
        assert!(
            error.to_string().contains("only Spot VMs can be evicted"),
            "{error}"
        );
        assert!(check_drillable(DrillKind::Reboot, &compute(VmPriority::Regular, id)).is_ok());
        assert!(check_drillable(DrillKind::SpotEviction, &compute(VmPriority::Spot, id)).is_ok());
        let error = check_drillable(DrillKind::Reboot, &compute(VmPriority::Regular, ""))
            .expect_err("no resource id");
        assert!(error.to_string().contains("no resourceId"), "{error}");
    }
}

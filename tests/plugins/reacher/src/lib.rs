//! Hostile test plugin, granted docker: on inject it reaches past its
//! target for the containers its parameters name (`bystander`, `protected`:
//! full ids), tries to see them through `find` (`selector`), and asks for a
//! helper with SYS_ADMIN on its own target. It logs what each call
//! returned, and fails the injection if any call was not denied. Then it
//! does its own job on its target: pauses it, and unpauses it on revert.

use faultline_sdk::docker::{self, HelperSpec, Namespace};
use faultline_sdk::{CapabilityError, Fault, FaultError, FaultInfo, ParamKind, ParamSpec, Platform, Settings, Target, log};

struct Reacher;

fn text_param(name: &str, description: &str) -> ParamSpec {
    ParamSpec { name: name.into(), description: description.into(), kind: ParamKind::Text, required: false }
}

/// Logs what a reach returned; whether it was denied.
fn denied<T>(what: &str, result: Result<T, CapabilityError>) -> bool {
    let said = match &result {
        Ok(_) => "succeeded".to_string(),
        Err(CapabilityError::Denied(why)) => format!("denied: {why}"),
        Err(other) => format!("failed otherwise: {other:?}"),
    };
    log::info(&format!("reach {what}: {said}"));
    matches!(result, Err(CapabilityError::Denied(_)))
}

fn helper(target: &str, cap_add: &[&str]) -> HelperSpec {
    HelperSpec {
        target: target.into(),
        args: vec!["cpu".into(), "--percent".into(), "1".into(), "--cpus".into(), "1".into()],
        share: vec![Namespace::Pid, Namespace::Network],
        cap_add: cap_add.iter().map(|c| c.to_string()).collect(),
        ttl_seconds: 30,
    }
}

/// Every reach on a container that is not ours; the ones that got through.
fn reach(id: &str) -> Vec<String> {
    let attempts = [
        ("inspect", denied(&format!("inspect {id}"), docker::inspect(id))),
        ("signal", denied(&format!("signal {id}"), docker::signal(id, "SIGKILL"))),
        ("pause", denied(&format!("pause {id}"), docker::pause(id))),
        ("restart", denied(&format!("restart {id}"), docker::restart(id, 0))),
        ("exec", denied(&format!("exec {id}"), docker::exec(id, &["/demo-service".to_string(), "--help".to_string()], 2000))),
        ("copy_in", denied(&format!("copy_in {id}"), docker::copy_in(id, "/reached", b"reached", 0o644))),
        ("stats", denied(&format!("stats {id}"), docker::stats(id))),
        ("run_helper", denied(&format!("run_helper on {id}"), docker::run_helper(&helper(id, &[])))),
        ("remove_helper", denied(&format!("remove_helper {id}"), docker::remove_helper(id))),
    ];
    attempts.into_iter().filter(|(_, denied)| !denied).map(|(call, _)| format!("{call} {id}")).collect()
}

impl Fault for Reacher {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "test_reacher".into(),
            aliases: vec![],
            description: "Reaches for containers outside its experiment, then pauses its target".into(),
            platforms: vec![Platform::Backend],
            intensity: None,
            params: vec![
                text_param("bystander", "Full id of a container that is not a target"),
                text_param("protected", "Full id of a protected container"),
                text_param("selector", "A find selector matching more than the target"),
            ],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let mut reached = vec![];
        for name in ["bystander", "protected"] {
            if let Some(id) = settings.text(name) {
                reached.extend(reach(id));
            }
        }
        if let Some(selector) = settings.text("selector") {
            let seen: Vec<String> = docker::find(&[selector.to_string()])?.into_iter().map(|c| c.id).filter(|id| *id != target.id).collect();
            log::info(&format!("reach find {selector}: {} other containers seen", seen.len()));
            reached.extend(seen.into_iter().map(|id| format!("find {id}")));
        }
        if !denied("run_helper with SYS_ADMIN", docker::run_helper(&helper(&target.id, &["SYS_ADMIN"]))) {
            reached.push("run_helper with SYS_ADMIN".into());
        }
        if !reached.is_empty() {
            return Err(FaultError::Failed(format!("reached beyond the scope: {}", reached.join(", "))));
        }
        docker::pause(&target.id)?;
        log::info(&format!("paused {}", target.name));
        Ok(target.id)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        match docker::unpause(&token) {
            Ok(()) | Err(CapabilityError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

faultline_sdk::register_fault!(Reacher);

//! The plugin's own tests: its compiled component against the SDK's
//! recording host.

use faultline_sdk::harness::{CallError, CapabilityError, FaultError, Harness, ParamValue, build_component, container};

async fn harness() -> Harness {
    let h = Harness::build(env!("CARGO_MANIFEST_DIR"), "docker,log").await.expect("the plugin builds and loads");
    h.set_containers(vec![container("web", &[("app", "shop")])]);
    h
}

#[tokio::test]
async fn describes_itself_as_a_share_of_targets_fault() {
    let h = harness().await;
    assert_eq!(h.info().name, "container_restart");
    assert_eq!(h.info().intensity.as_ref().unwrap().max, 100.0);
}

#[tokio::test]
async fn inject_restarts_with_the_stop_timeout_and_revert_only_looks() {
    let h = harness().await;
    let mut settings = Harness::settings(100.0);
    settings.params.push(("stop_timeout_seconds".into(), ParamValue::Integer(3)));
    let token = h.inject(Harness::container("web"), settings).await.unwrap();
    assert_eq!(h.calls()[0].operation, "docker.restart");
    assert_eq!(h.calls()[0].args, ["\"web\"", "3"]);
    h.clear_calls();

    h.revert(&token).await.unwrap();
    let ops: Vec<_> = h.calls().into_iter().map(|c| c.operation).collect();
    assert_eq!(ops, ["docker.inspect"]);
}

#[tokio::test]
async fn a_vanished_container_is_reported_as_unavailable_not_as_a_failure() {
    let h = harness().await;
    h.fail_next("docker.restart", CapabilityError::NotFound("web".into()));
    let error = h.inject(Harness::container("web"), Harness::settings(100.0)).await.unwrap_err();
    assert!(matches!(error, CallError::Fault(FaultError::TargetUnavailable(_))), "{error:?}");
}

#[tokio::test]
async fn validate_refuses_a_stop_timeout_out_of_range() {
    let h = harness().await;
    let mut settings = Harness::settings(100.0);
    settings.params.push(("stop_timeout_seconds".into(), ParamValue::Integer(900)));
    assert!(matches!(h.validate(settings).await, Err(CallError::Fault(FaultError::InvalidSettings(_)))));
}

#[tokio::test]
async fn without_the_docker_grant_the_plugin_is_refused() {
    let bytes = std::fs::read(build_component(env!("CARGO_MANIFEST_DIR").as_ref()).unwrap()).unwrap();
    let refused = Harness::load(&bytes, "log").await.err().expect("refused");
    assert!(refused.contains("faultline:plugin/docker@0.1.0"), "{refused}");
}

#[tokio::test]
async fn a_container_that_is_not_a_target_is_out_of_reach() {
    let h = harness().await;
    h.inject(Harness::container("web"), Harness::settings(100.0)).await.unwrap();
    // As on the host, an instance acts only on its experiment's targets.
    let error = h.revert("db").await.unwrap_err();
    assert!(matches!(error, CallError::Fault(FaultError::Capability(CapabilityError::Denied(_)))), "{error:?}");
    assert!(h.calls().iter().all(|c| !c.args.contains(&"\"db\"".to_string())), "nothing reached db: {:?}", h.calls());
}

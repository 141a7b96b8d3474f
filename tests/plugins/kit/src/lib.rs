//! A fault whose only effect is what it writes to the log: each inject,
//! adjust and revert logs its token, so a test can check from the log alone
//! that every injection was undone. The hostile test plugins reuse it for
//! their well-behaved paths.

use faultline_sdk::{FaultError, FaultInfo, IntensitySpec, ParamKind, ParamSpec, Platform, Settings, Target, clock, log};

/// Describes a log-only fault under `name`, for every platform.
pub fn describe(name: &str, description: &str) -> FaultInfo {
    describe_with(name, description, IntensitySpec::per_target("level", 0.0, 100.0, 50.0, 10.0))
}

/// The same, with another intensity model.
pub fn describe_with(name: &str, description: &str, intensity: IntensitySpec) -> FaultInfo {
    FaultInfo {
        name: name.into(),
        aliases: vec![],
        description: description.into(),
        platforms: vec![Platform::Backend, Platform::Frontend, Platform::Android],
        intensity: Some(intensity),
        params: vec![ParamSpec {
            name: "label".into(),
            description: "Free text copied into the log records".into(),
            kind: ParamKind::Text,
            required: false,
        }],
        conflicts_with: vec![],
    }
}

/// Injects by logging `inject <token>`; the token names target and intensity.
/// Targets named `gone...` are reported unavailable, as a vanished container is.
pub fn inject(target: &Target, settings: &Settings) -> Result<String, FaultError> {
    if target.name.starts_with("gone") {
        return Err(FaultError::TargetUnavailable(format!("{} is gone", target.name)));
    }
    let token = format!("{}@{}#{}", target.id, settings.intensity, clock::monotonic_ms());
    log::info(&format!("inject {token}"));
    Ok(token)
}

/// Adjusts by logging `adjust <old> -> <new>`.
pub fn adjust(token: &str, settings: &Settings) -> Result<String, FaultError> {
    let target = token.split('@').next().unwrap_or_default();
    let new = format!("{target}@{}#{}", settings.intensity, clock::monotonic_ms());
    log::info(&format!("adjust {token} -> {new}"));
    Ok(new)
}

/// Reverts by logging `revert <token>`.
pub fn revert(token: &str) -> Result<(), FaultError> {
    log::info(&format!("revert {token}"));
    Ok(())
}

/// Refuses settings whose label says so, to test validation paths.
pub fn validate(settings: &Settings) -> Result<(), FaultError> {
    match settings.text("label") {
        Some("invalid") => Err(FaultError::InvalidSettings("label `invalid` is refused".into())),
        _ => Ok(()),
    }
}

/// Whether a hostile plugin should misbehave on this target: on targets
/// named `bad...`, so a test can first get a good injection journaled.
pub fn is_bad(target: &Target) -> bool {
    target.name.starts_with("bad")
}

/// A hostile test plugin: `$misbehave` runs on targets named `bad...`;
/// elsewhere the plugin behaves like test_steady.
#[macro_export]
macro_rules! hostile_plugin {
    ($name:literal, $what:literal, |$target:ident| $misbehave:block) => {
        struct Hostile;

        impl faultline_sdk::Fault for Hostile {
            fn describe() -> faultline_sdk::FaultInfo {
                $crate::describe($name, concat!($what, " on targets named bad*"))
            }
            fn inject(
                target: faultline_sdk::Target,
                settings: faultline_sdk::Settings,
            ) -> Result<String, faultline_sdk::FaultError> {
                if $crate::is_bad(&target) {
                    let $target = &target;
                    $misbehave
                }
                $crate::inject(&target, &settings)
            }
            fn adjust(token: String, settings: faultline_sdk::Settings) -> Result<String, faultline_sdk::FaultError> {
                $crate::adjust(&token, &settings)
            }
            fn revert(token: String) -> Result<(), faultline_sdk::FaultError> {
                $crate::revert(&token)
            }
        }

        faultline_sdk::register_fault!(Hostile);
    };
}

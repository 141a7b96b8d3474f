//! An Android start's own fields (the spec's request), and the host's
//! Android configuration (its command line): which device, which
//! emulator, which network profile.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::profiles;

/// What an Android start takes besides the common fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AndroidOptions {
    /// `android`: the experiment's targets are Android apps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<AndroidKind>,
    /// `android`: the app is observed on its device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation_type: Option<AndroidKind>,
    /// The APK to install and run: the id its upload returned. Without
    /// one, the packages must be installed on the device already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apk: Option<String>,
    /// How the emulator runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub android_run: Option<AndroidRun>,
    /// What the app is expected to do; checked, reported and scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
    /// The emulator to launch (overrides the host's `--emulator-*` settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<EmulatorSettings>,
    /// The device's network: LTE, 3G, EDGE, GPRS or Full (the host's
    /// `--network-profile` by default). Applied to an emulator; a
    /// network_throttle takes its share of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_profile: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AndroidKind {
    Android,
}

/// Emulator run settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AndroidRun {
    /// The emulator device (AVD) to launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avd_name: Option<String>,
    /// Run the emulator without a window (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headless: Option<bool>,
    /// Clear the app's data before the experiment (`pm clear`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_app_state: Option<bool>,
}

/// The emulator configuration: `emulator.name`, `emulator.sdk_version`,
/// `emulator.screen_density`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmulatorSettings {
    /// The AVD to launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The API level the device must run; checked once it has booted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub sdk_version: Option<u32>,
    /// Screen density in dpi, set for the experiment (`cmd window density`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 72, maximum = 1000)]
    pub screen_density: Option<u32>,
}

/// Expectations of the app under test: each `true` expects the property,
/// `false` expects its opposite; one left out is not checked.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    /// The app's process runs at the end of the experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
    /// No crash of the app during the experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_crash: Option<bool>,
    /// No ANR (application not responding) of the app during the experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_anr: Option<bool>,
    /// Once the faults are reverted the app is back as in the baseline
    /// (running, and in the foreground if it was); a kill_app brings the
    /// app back at its revert when this is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_recover: Option<bool>,
}

impl AndroidOptions {
    /// What the request's fields say beyond their types.
    pub fn check(&self) -> Result<(), String> {
        let blank = |s: &str| s.trim().is_empty();
        if self.apk.as_deref().is_some_and(blank) {
            return Err("apk must not be empty".into());
        }
        if self.android_run.as_ref().and_then(|r| r.avd_name.as_deref()).is_some_and(blank) {
            return Err("android_run.avd_name must not be empty".into());
        }
        if let Some(emulator) = &self.emulator {
            if emulator.name.as_deref().is_some_and(blank) {
                return Err("emulator.name must not be empty".into());
            }
            if emulator.sdk_version.is_some_and(|v| !(1..=100).contains(&v)) {
                return Err("emulator.sdk_version must be an API level between 1 and 100".into());
            }
            if emulator.screen_density.is_some_and(|d| !(72..=1000).contains(&d)) {
                return Err("emulator.screen_density must be between 72 and 1000 dpi".into());
            }
        }
        if let Some(profile) = &self.network_profile
            && profiles::find(profile).is_none()
        {
            return Err(format!("network_profile must be one of {}", profiles::names().join(", ")));
        }
        Ok(())
    }
}

/// The host's Android configuration.
#[derive(Debug, Clone)]
pub struct AndroidConfig {
    /// The device to use when none is launched (`--adb-serial`, else `ANDROID_SERIAL`).
    pub serial: Option<String>,
    /// The SDK's `emulator` binary; when set, every experiment launches its own emulator.
    pub emulator: Option<PathBuf>,
    pub emulator_name: Option<String>,
    pub sdk_version: Option<u32>,
    pub screen_density: Option<u32>,
    pub network_profile: String,
    /// How long a launched emulator may take to boot.
    pub boot_timeout: Duration,
}

impl Default for AndroidConfig {
    fn default() -> Self {
        AndroidConfig {
            serial: None,
            emulator: None,
            emulator_name: None,
            sdk_version: None,
            screen_density: None,
            network_profile: profiles::DEFAULT.into(),
            boot_timeout: Duration::from_secs(300),
        }
    }
}

/// One experiment's settings: the request's over the host's.
#[derive(Debug, Clone)]
pub struct Settings {
    pub apk: Option<String>,
    /// The AVD to launch, when an emulator is launched.
    pub avd: Option<String>,
    pub headless: bool,
    pub reset_app_state: bool,
    pub sdk_version: Option<u32>,
    pub screen_density: Option<u32>,
    pub profile: &'static profiles::Profile,
    pub expected: Expected,
}

impl Settings {
    pub fn new(options: &AndroidOptions, config: &AndroidConfig) -> Result<Settings, String> {
        options.check()?;
        let run = options.android_run.clone().unwrap_or_default();
        let emulator = options.emulator.clone().unwrap_or_default();
        let profile_name = options.network_profile.as_deref().unwrap_or(&config.network_profile);
        Ok(Settings {
            apk: options.apk.clone(),
            avd: run.avd_name.or(emulator.name).or_else(|| config.emulator_name.clone()),
            headless: run.headless.unwrap_or(true),
            reset_app_state: run.reset_app_state.unwrap_or(false),
            sdk_version: emulator.sdk_version.or(config.sdk_version),
            screen_density: emulator.screen_density.or(config.screen_density),
            profile: profiles::find(profile_name).ok_or_else(|| format!("network profile `{profile_name}` is none of {}", profiles::names().join(", ")))?,
            expected: options.expected.clone().unwrap_or_default(),
        })
    }
}

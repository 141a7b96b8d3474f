//! Network profiles: the one table of their speeds and delays. The names
//! are the spec's (LTE, 3G, EDGE, GPRS, Full); each maps to the emulator's
//! own profile name (`-netspeed`, `-netdelay`, and the console's `network
//! speed <name>` / `network delay <name>`), with the figures the current
//! emulator documents. Older emulator builds used other figures: this
//! table is what Faultline assumes, and a throttle is computed from it.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Profile {
    /// As requests name it.
    pub name: &'static str,
    /// The emulator's name for it.
    pub emulator: &'static str,
    pub up_kbps: f64,
    pub down_kbps: f64,
    pub delay_min_ms: u32,
    pub delay_max_ms: u32,
}

/// "Full" has no limit on the emulator; a throttle needs a rate to take a
/// share of, so it counts as 1 Gbit/s each way.
const FULL_KBPS: f64 = 1_000_000.0;

pub const PROFILES: [Profile; 5] = [
    Profile { name: "LTE", emulator: "lte", up_kbps: 58_000.0, down_kbps: 173_000.0, delay_min_ms: 0, delay_max_ms: 0 },
    Profile { name: "3G", emulator: "umts", up_kbps: 384.0, down_kbps: 384.0, delay_min_ms: 35, delay_max_ms: 200 },
    Profile { name: "EDGE", emulator: "edge", up_kbps: 473.6, down_kbps: 473.6, delay_min_ms: 80, delay_max_ms: 400 },
    Profile { name: "GPRS", emulator: "gprs", up_kbps: 28.8, down_kbps: 57.6, delay_min_ms: 35, delay_max_ms: 200 },
    Profile { name: "Full", emulator: "full", up_kbps: FULL_KBPS, down_kbps: FULL_KBPS, delay_min_ms: 0, delay_max_ms: 0 },
];

/// The default when neither the host nor the request names one.
pub const DEFAULT: &str = "Full";

/// A profile by its name, in any case (`lte`, `LTE`), or by the emulator's name (`umts`).
pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name.eq_ignore_ascii_case(name) || p.emulator.eq_ignore_ascii_case(name))
}

pub fn names() -> Vec<&'static str> {
    PROFILES.iter().map(|p| p.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_found_by_the_specs_name_or_the_emulators() {
        assert_eq!(find("LTE").unwrap().emulator, "lte");
        assert_eq!(find("3g").unwrap().emulator, "umts");
        assert_eq!(find("umts").unwrap().name, "3G");
        assert_eq!(find("full").unwrap().down_kbps, FULL_KBPS);
        assert!(find("5G").is_none());
        assert_eq!(names(), ["LTE", "3G", "EDGE", "GPRS", "Full"]);
    }
}

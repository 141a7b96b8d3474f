//! What Android makes of a manifest's elements: the package, the version
//! and SDK levels, and the launchable activity as the launcher finds it
//! (`PackageManager.queryIntentActivities` for MAIN + LAUNCHER): the first
//! enabled `<activity>` or `<activity-alias>` of `<application>`, in
//! document order, with one intent-filter holding both the MAIN action
//! and the LAUNCHER category. A disabled application has none; an alias
//! whose target activity is not declared before it is not a component.
//! `.X` and bare `X` names are the package's.

use crate::axml::{Attribute, Event, Value};
use crate::{ApkError, ApkInfo};

const NAME: u32 = 0x0101_0003;
const LABEL: u32 = 0x0101_0001;
const ENABLED: u32 = 0x0101_000e;
const TARGET_ACTIVITY: u32 = 0x0101_0202;
const VERSION_CODE: u32 = 0x0101_021b;
const VERSION_NAME: u32 = 0x0101_021c;
const MIN_SDK: u32 = 0x0101_020c;
const TARGET_SDK: u32 = 0x0101_0270;

const MAIN: &str = "android.intent.action.MAIN";
const LAUNCHER: &str = "android.intent.category.LAUNCHER";

/// An android: attribute, by resource id; by name only when the resource
/// map does not say (obfuscators strip names, not ids).
fn android<'a>(attributes: &'a [Attribute], id: u32, name: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|a| a.resource_id == Some(id))
        .or_else(|| attributes.iter().find(|a| a.resource_id.is_none() && a.namespaced && a.name == name))
        .map(|a| &a.value)
}

fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Text(t) => Some(t.clone()),
        _ => None,
    }
}

fn number(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Int(n) => Some(u64::from(*n)),
        Value::Text(t) => t.trim().parse().ok(),
        _ => None,
    }
}

fn enabled(attributes: &[Attribute]) -> bool {
    !matches!(android(attributes, ENABLED, "enabled"), Some(Value::Bool(false)))
}

/// Android's rule for a package name: two or more segments, each a
/// letter then letters, digits or underscores.
fn valid_package(name: &str) -> bool {
    let segments: Vec<&str> = name.split('.').collect();
    segments.len() >= 2
        && segments.iter().all(|s| s.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// A class name as the package resolves it.
fn qualified(package: &str, name: &str) -> String {
    match name {
        n if n.starts_with('.') => format!("{package}{n}"),
        n if !n.contains('.') => format!("{package}.{n}"),
        n => n.to_string(),
    }
}

/// An activity or alias being read, with what its filters declared.
struct Component {
    name: String,
    alias: bool,
    enabled: bool,
    /// The target of an alias, qualified.
    target: Option<String>,
    launchable: bool,
}

pub fn read(events: &[Event]) -> Result<ApkInfo, ApkError> {
    let mut info = ApkInfo::default();
    let mut path: Vec<&str> = vec![];
    let mut application_enabled = true;
    let mut declared: Vec<String> = vec![];
    let mut component: Option<Component> = None;
    // MAIN and LAUNCHER seen in the intent-filter being read.
    let mut filter = (false, false);
    let mut package = None;
    for event in events {
        let (name, attributes) = match event {
            Event::Start { name, attributes } => (name.as_str(), attributes.as_slice()),
            Event::End => {
                match path.pop() {
                    Some("intent-filter") => {
                        if let Some(c) = component.as_mut() {
                            c.launchable |= filter == (true, true);
                        }
                    }
                    Some("activity" | "activity-alias") if path.last() == Some(&"application") => {
                        let c = component.take().expect("a component is being read");
                        let target_known = c.target.as_ref().is_none_or(|t| declared.contains(t));
                        if !c.alias {
                            declared.push(c.name.clone());
                        }
                        if info.activity.is_none() && c.launchable && c.enabled && application_enabled && target_known {
                            info.activity = Some(c.name);
                        }
                    }
                    _ => {}
                }
                continue;
            }
        };
        let parent = path.last().copied();
        path.push(name);
        match (parent, name) {
            (None, "manifest") => {
                package = attributes.iter().find(|a| a.name == "package" && !a.namespaced).and_then(|a| text(Some(&a.value)));
                info.version_code = number(android(attributes, VERSION_CODE, "versionCode"));
                info.version_name = text(android(attributes, VERSION_NAME, "versionName"));
            }
            (Some("manifest"), "uses-sdk") => {
                info.min_sdk = number(android(attributes, MIN_SDK, "minSdkVersion")).map(|n| n as u32);
                info.target_sdk = number(android(attributes, TARGET_SDK, "targetSdkVersion")).map(|n| n as u32);
            }
            (Some("manifest"), "application") => {
                application_enabled = enabled(attributes);
                info.label = text(android(attributes, LABEL, "label"));
            }
            (Some("application"), "activity" | "activity-alias") => {
                let package = package.as_deref().unwrap_or_default();
                let name = text(android(attributes, NAME, "name")).filter(|n| !n.is_empty()).map(|n| qualified(package, &n));
                let target = text(android(attributes, TARGET_ACTIVITY, "targetActivity")).map(|t| qualified(package, &t));
                component = Some(Component {
                    name: name.unwrap_or_default(),
                    alias: name_is_alias(event),
                    enabled: enabled(attributes),
                    target,
                    launchable: false,
                });
            }
            (Some("activity" | "activity-alias"), "intent-filter") => filter = (false, false),
            (Some("intent-filter"), "action") => filter.0 |= text(android(attributes, NAME, "name")).as_deref() == Some(MAIN),
            (Some("intent-filter"), "category") => filter.1 |= text(android(attributes, NAME, "name")).as_deref() == Some(LAUNCHER),
            _ => {}
        }
    }
    let package = package.ok_or_else(|| ApkError::MissingPackage("<manifest> has no package attribute".into()))?;
    if !valid_package(&package) {
        return Err(ApkError::MissingPackage(format!("`{package}` is not a package name (two or more segments of letters, digits and _)")));
    }
    info.package = package;
    // A nameless component is no component.
    info.activity = info.activity.filter(|a| !a.is_empty());
    Ok(info)
}

fn name_is_alias(event: &Event) -> bool {
    matches!(event, Event::Start { name, .. } if name == "activity-alias")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_against_the_package() {
        assert_eq!(qualified("a.b", ".Main"), "a.b.Main");
        assert_eq!(qualified("a.b", "Main"), "a.b.Main");
        assert_eq!(qualified("a.b", "c.d.Main"), "c.d.Main");
    }

    #[test]
    fn package_names_follow_androids_rule() {
        assert!(valid_package("dev.faultline.testapp") && valid_package("a.b_1"));
        for bad in ["single", "1a.b", "a..b", "a.b-c", ""] {
            assert!(!valid_package(bad), "{bad}");
        }
    }
}

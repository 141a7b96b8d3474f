//! Operator configuration of what each plugin may import.

use std::collections::HashMap;

use faultline_plugin_runtime::Grants;

/// Grants by plugin name, and the grants of any plugin not named.
#[derive(Debug, Clone)]
pub struct GrantPolicy {
    pub per_plugin: HashMap<String, Grants>,
    pub default: Grants,
}

impl GrantPolicy {
    /// Parses `name=cap,cap` entries, as given with `--grant`.
    pub fn parse(entries: &[String], default: &str) -> Result<Self, String> {
        let mut per_plugin = HashMap::new();
        for entry in entries {
            let (name, caps) = entry
                .split_once('=')
                .ok_or_else(|| format!("grant `{entry}` must look like plugin-name=docker,log,clock"))?;
            per_plugin.insert(name.trim().to_string(), Grants::parse(caps)?);
        }
        Ok(GrantPolicy { per_plugin, default: Grants::parse(default)? })
    }

    pub fn for_plugin(&self, name: &str) -> Grants {
        self.per_plugin.get(name).cloned().unwrap_or_else(|| self.default.clone())
    }
}

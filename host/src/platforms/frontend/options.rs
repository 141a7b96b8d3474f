//! A frontend start's own fields: how faults reach the app (`mode`), which
//! requests they select (`routes`), and where the proxy listens.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Most routes one experiment may name.
pub const MAX_ROUTES: usize = 32;

/// The frontend's fields of a start request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FrontendOptions {
    /// `proxy` (the default): the fault proxy applies the faults to the
    /// traffic it forwards. `service_worker`: the service worker applies
    /// them inside the browser; the proxy then passes traffic untouched.
    #[serde(default)]
    pub mode: Mode,
    /// Requests the fault applies to, for targets given without a path;
    /// by default every request of the site.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Where the proxy listens for a site (`"http://127.0.0.1:8080":
    /// "127.0.0.1:9000"`); sites not listed get a free port on the host's
    /// `--proxy-bind` address.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, String>)]
    pub proxy_listen: BTreeMap<String, SocketAddr>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Proxy,
    ServiceWorker,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Proxy => "proxy",
            Mode::ServiceWorker => "service_worker",
        }
    }
}

/// Requests a fault selects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Pattern on the URL path, starting with `/`; `*` matches any run of
    /// characters (`/api/*`).
    pub path: String,
    /// HTTP methods; empty or absent: all.
    #[serde(default)]
    pub methods: Vec<String>,
}

impl FrontendOptions {
    /// The fields' own checks; the sites are checked when targets resolve.
    pub fn check(&self) -> Result<(), String> {
        if self.routes.len() > MAX_ROUTES {
            return Err(format!("at most {MAX_ROUTES} routes"));
        }
        for (i, route) in self.routes.iter().enumerate() {
            check_path(&route.path).map_err(|why| format!("routes[{i}].path: {why}"))?;
            if route.methods.iter().any(|m| m.is_empty() || m.len() > 16 || !m.bytes().all(|b| b.is_ascii_alphabetic())) {
                return Err(format!("routes[{i}].methods must be HTTP method names such as GET"));
            }
        }
        Ok(())
    }
}

/// A path pattern: starts with `/`, visible ASCII, bounded.
pub fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') || path.len() > 512 || !path.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("`{path}` must start with / and be at most 512 visible characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_default_to_the_proxy_on_every_request_and_refuse_bad_routes() {
        let o: FrontendOptions = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(o, FrontendOptions::default());
        assert_eq!(o.mode, Mode::Proxy);
        let o: FrontendOptions = serde_json::from_value(serde_json::json!({
            "mode": "service_worker", "routes": [{"path": "/api/*", "methods": ["GET"]}],
            "proxy_listen": {"http://127.0.0.1:8080": "127.0.0.1:9000"}
        }))
        .unwrap();
        assert!(o.check().is_ok());
        let bad = |v| serde_json::from_value::<FrontendOptions>(v).map_err(|e| e.to_string()).and_then(|o: FrontendOptions| o.check());
        assert!(bad(serde_json::json!({"mode": "tunnel"})).is_err());
        assert!(bad(serde_json::json!({"routes": [{"path": "api"}]})).is_err());
        assert!(bad(serde_json::json!({"routes": [{"path": "/a", "methods": ["G T"]}]})).is_err());
        assert!(bad(serde_json::json!({"proxy_listen": {"http://a:1": "not an address"}})).is_err());
    }
}

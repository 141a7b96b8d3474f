//! Frontend targets: an origin (`http://127.0.0.1:8080`, the whole site) or
//! a URL whose path is a route pattern (`http://127.0.0.1:8080/api/*`).
//! A target's id is its site, or its site and route (`<site><path>`), the
//! shape the proxy capability's scope checks.

use faultline_plugin_runtime::model::{Platform as PlatformKind, Target};

use super::options::{Route, check_path};

/// Attribute names a frontend target carries for its plugin.
pub const SITE: &str = "site";
pub const PATH: &str = "path";
pub const METHODS: &str = "methods";

/// One entry of `targets`, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `scheme://host:port`, lowercase, with the port spelled out.
    pub site: String,
    pub scheme: String,
    pub host: String,
    pub port: u16,
    /// The route pattern the URL named, if any.
    pub path: Option<String>,
}

/// Reads an origin or URL.
pub fn parse(entry: &str) -> Result<Entry, String> {
    let uri: axum::http::Uri = entry.trim().parse().map_err(|e| format!("`{entry}` is not a URL: {e}"))?;
    let scheme = uri.scheme_str().map(str::to_ascii_lowercase).ok_or_else(|| format!("`{entry}` needs a scheme, such as http://"))?;
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        other => return Err(format!("`{entry}`: the scheme must be http or https, not {other}")),
    };
    let authority = uri.authority().ok_or_else(|| format!("`{entry}` has no host"))?;
    if authority.as_str().contains('@') {
        return Err(format!("`{entry}`: credentials in a target URL are not accepted"));
    }
    let host = authority.host().to_ascii_lowercase();
    let port = authority.port_u16().unwrap_or(default_port);
    if uri.query().is_some() {
        return Err(format!("`{entry}`: a target names a site or a route, without a query"));
    }
    let path = match uri.path() {
        "" | "/" => None,
        p => {
            check_path(p)?;
            Some(p.to_string())
        }
    };
    Ok(Entry { site: format!("{scheme}://{host}:{port}"), scheme, host, port, path })
}

/// The targets of an entry: the route its URL names, else one per
/// request route, else the whole site.
pub fn targets(entry: &Entry, routes: &[Route]) -> Vec<Target> {
    let target = |path: &str, methods: &[String]| {
        let id = if path == "/*" && methods.is_empty() { entry.site.clone() } else { format!("{}{path}", entry.site) };
        let mut attributes = vec![(SITE.to_string(), entry.site.clone()), (PATH.to_string(), path.to_string())];
        let methods: Vec<String> = methods.iter().map(|m| m.to_ascii_uppercase()).collect();
        attributes.push((METHODS.to_string(), methods.join(",")));
        let name = if methods.is_empty() { id.clone() } else { format!("{} {id}", methods.join(",")) };
        Target { platform: PlatformKind::Frontend, id, name, attributes }
    };
    match (&entry.path, routes.is_empty()) {
        (Some(path), _) => vec![target(path, &[])],
        (None, false) => routes.iter().map(|r| target(&r.path, &r.methods)).collect(),
        (None, true) => vec![target("/*", &[])],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_urls_become_sites_and_routes() {
        let e = parse("HTTP://LocalHost:8080").unwrap();
        assert_eq!((e.site.as_str(), e.path.as_deref()), ("http://localhost:8080", None));
        assert_eq!(parse("http://127.0.0.1/").unwrap().site, "http://127.0.0.1:80");
        let e = parse("http://127.0.0.1:8080/api/*").unwrap();
        assert_eq!(e.path.as_deref(), Some("/api/*"));
        let t = targets(&e, &[]);
        assert_eq!(t[0].id, "http://127.0.0.1:8080/api/*");
        let site = parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(targets(&site, &[])[0].id, "http://127.0.0.1:8080", "the whole site is the site itself");
        let routes = [Route { path: "/a/*".into(), methods: vec!["post".into()] }, Route { path: "/b".into(), methods: vec![] }];
        let t = targets(&site, &routes);
        assert_eq!(t.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["POST http://127.0.0.1:8080/a/*", "http://127.0.0.1:8080/b"]);
        assert!(t[0].attributes.contains(&(METHODS.to_string(), "POST".to_string())));
        for bad in ["127.0.0.1:8080", "ftp://a:1", "http://u:p@a:1", "http://a:1/x?y=1", "shop"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}

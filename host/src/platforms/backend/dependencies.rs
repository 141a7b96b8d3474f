//! Which containers depend on which, from what Docker knows, and how far a
//! fault on the targets can reach.
//!
//! An edge A → B ("A depends on B") comes from:
//! - compose: A's `com.docker.compose.depends_on` label names B's service in
//!   the same project;
//! - links: A is linked to B;
//! - references: one of A's environment values or command arguments names
//!   B (its name, a network alias or its compose service) and the two share
//!   a network. Shared networks alone are no edge: they only say who can
//!   reach whom.
//!
//! Over that graph, for a set of targets:
//! - `dependencies`: what the targets need, directly or transitively;
//! - `blast_radius`: how many other containers depend on a target, directly
//!   or transitively: those a failure of the targets can reach;
//! - `cascade_depth`: the longest chain of such dependents (0 when none).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What the graph needs to know about one container.
#[derive(Debug, Clone, Default)]
pub struct Node {
    pub id: String,
    pub name: String,
    /// Names others may use for it: network aliases, its compose service.
    pub aliases: BTreeSet<String>,
    pub networks: BTreeSet<String>,
    pub compose_project: Option<String>,
    pub compose_service: Option<String>,
    /// Services named by its compose depends_on label.
    pub depends_on_services: BTreeSet<String>,
    /// Names of the containers it is linked to.
    pub links: BTreeSet<String>,
    /// Words from its environment values and command arguments.
    pub words: BTreeSet<String>,
}

/// The dependency information of the spec, for a set of targets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Impact {
    pub targets: Vec<String>,
    pub dependencies: Vec<String>,
    /// The containers in the blast radius, by name.
    pub dependents: Vec<String>,
    pub blast_radius: usize,
    pub cascade_depth: usize,
}

/// Splits a value into the words that could name a host: `http://api:8080/x` → api, 8080, x ...
pub fn words(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
}

/// Edges by container name: who each one depends on.
pub fn edges(nodes: &[Node]) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = nodes.iter().map(|n| (n.name.clone(), BTreeSet::new())).collect();
    for a in nodes {
        for b in nodes.iter().filter(|b| b.name != a.name) {
            let same_project = a.compose_project.is_some() && a.compose_project == b.compose_project;
            let compose = same_project && b.compose_service.as_ref().is_some_and(|s| a.depends_on_services.contains(s));
            let linked = a.links.contains(&b.name);
            let reachable = !a.networks.is_disjoint(&b.networks);
            let named = reachable && (a.words.contains(&b.name) || b.aliases.iter().any(|alias| a.words.contains(alias)));
            if compose || linked || named {
                edges.get_mut(&a.name).expect("every node has an entry").insert(b.name.clone());
            }
        }
    }
    edges
}

/// Breadth-first walk from `start` along `edges`; each reached node with its distance.
fn walk(start: &BTreeSet<String>, edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, usize> {
    let mut seen: BTreeMap<String, usize> = start.iter().map(|s| (s.clone(), 0)).collect();
    let mut queue: VecDeque<String> = start.iter().cloned().collect();
    while let Some(node) = queue.pop_front() {
        let distance = seen[&node];
        for next in edges.get(&node).into_iter().flatten() {
            if !seen.contains_key(next) {
                seen.insert(next.clone(), distance + 1);
                queue.push_back(next.clone());
            }
        }
    }
    start.iter().for_each(|s| {
        seen.remove(s);
    });
    seen
}

pub fn impact(nodes: &[Node], targets: &[String]) -> Impact {
    let edges = edges(nodes);
    let mut reverse: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, bs) in &edges {
        for b in bs {
            reverse.entry(b.clone()).or_default().insert(a.clone());
        }
    }
    let start: BTreeSet<String> = targets.iter().cloned().collect();
    let needed = walk(&start, &edges);
    let reached = walk(&start, &reverse);
    Impact {
        targets: start.iter().cloned().collect(),
        dependencies: needed.keys().cloned().collect(),
        dependents: reached.keys().cloned().collect(),
        blast_radius: reached.len(),
        cascade_depth: reached.values().copied().max().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, networks: &[&str]) -> Node {
        Node {
            id: name.into(),
            name: name.into(),
            networks: networks.iter().map(|n| n.to_string()).collect(),
            ..Node::default()
        }
    }

    /// web → api → db by references, cache linked from api, batch on its own.
    fn system() -> Vec<Node> {
        let mut web = node("web", &["front"]);
        web.words = words("--upstream http://api:8080").collect();
        let mut api = node("api", &["front", "back"]);
        api.words = words("DB_URL=postgres://db:5432/shop").collect();
        api.links.insert("cache".into());
        let mut db = node("db", &["back"]);
        db.aliases.insert("database".into());
        let cache = node("cache", &[]);
        let mut batch = node("batch", &["other"]);
        batch.words = words("DB=db").collect(); // names db, but cannot reach it
        vec![web, api, db, cache, batch]
    }

    #[test]
    fn a_failure_of_the_bottom_tier_reaches_every_tier_above_it() {
        let i = impact(&system(), &["db".into()]);
        assert_eq!(i.dependents, ["api", "web"]);
        assert_eq!((i.blast_radius, i.cascade_depth), (2, 2));
        assert!(i.dependencies.is_empty());
    }

    #[test]
    fn the_top_tier_needs_everything_below_and_nothing_depends_on_it() {
        let i = impact(&system(), &["web".into()]);
        assert_eq!(i.dependencies, ["api", "cache", "db"]);
        assert_eq!((i.blast_radius, i.cascade_depth), (0, 0));
    }

    #[test]
    fn a_name_across_networks_that_do_not_meet_is_no_dependency() {
        let i = impact(&system(), &["batch".into()]);
        assert!(i.dependencies.is_empty());
    }

    #[test]
    fn compose_depends_on_links_services_of_one_project_only() {
        let mut web = node("shop-web-1", &[]);
        web.compose_project = Some("shop".into());
        web.depends_on_services.insert("api".into());
        let mut api = node("shop-api-1", &[]);
        api.compose_project = Some("shop".into());
        api.compose_service = Some("api".into());
        let mut other = node("blog-api-1", &[]);
        other.compose_project = Some("blog".into());
        other.compose_service = Some("api".into());
        let i = impact(&[web, api, other], &["shop-api-1".into()]);
        assert_eq!(i.dependents, ["shop-web-1"]);
    }

    #[test]
    fn several_targets_count_each_dependent_once_at_its_shortest_distance() {
        let i = impact(&system(), &["db".into(), "cache".into()]);
        assert_eq!(i.dependents, ["api", "web"]);
        assert_eq!((i.blast_radius, i.cascade_depth), (2, 2));
    }
}

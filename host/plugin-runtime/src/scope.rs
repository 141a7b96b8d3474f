//! What one plugin instance may act on. A grant says which capabilities a
//! plugin may import; the scope says on what: its experiment and that
//! experiment's targets. Each capability checks its calls against it and
//! answers `denied` outside it.

use std::sync::Arc;

use crate::model::Target;

/// Cheap to clone: every capability slot of an instance keeps a copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    experiment: Option<Arc<str>>,
    targets: Arc<[String]>,
}

impl Scope {
    /// No experiment and no target: for `describe` and `validate`, which
    /// have no business acting on anything.
    pub fn none() -> Scope {
        Scope::default()
    }

    /// An experiment and the ids of its targets (full container ids on the
    /// backend).
    pub fn experiment(id: &str, targets: impl IntoIterator<Item = String>) -> Scope {
        Scope { experiment: Some(id.into()), targets: targets.into_iter().collect() }
    }

    /// An experiment and its resolved targets.
    pub fn of(id: &str, targets: &[Target]) -> Scope {
        Scope::experiment(id, targets.iter().map(|t| t.id.clone()))
    }

    pub fn experiment_id(&self) -> Option<&str> {
        self.experiment.as_deref()
    }

    pub fn targets(&self) -> &[String] {
        &self.targets
    }

    /// Whether `id` is exactly one of the targets: never a name or a prefix,
    /// which could come to mean another object than the one planned.
    pub fn covers(&self, id: &str) -> bool {
        self.targets.iter().any(|t| t == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_only_the_exact_target_ids() {
        let scope = Scope::experiment("exp-1", ["3f4e0c1d2b5a".to_string() + &"0".repeat(52)]);
        assert!(scope.covers(&("3f4e0c1d2b5a".to_string() + &"0".repeat(52))));
        assert!(!scope.covers("3f4e0c1d2b5a"), "a prefix is not the target");
        assert!(!scope.covers(""));
        assert_eq!(scope.experiment_id(), Some("exp-1"));
    }

    #[test]
    fn the_empty_scope_covers_nothing() {
        assert!(!Scope::none().covers(""));
        assert_eq!(Scope::none().experiment_id(), None);
    }
}

//! Permission scopes (spec: Authentication, Scopes). Tokens carry them space-separated in
//! the `scope` claim; a [`ScopeSet`] is the parsed, deduplicated form.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

macro_rules! scopes {
    ($($variant:ident => $name:literal),+ $(,)?) => {
        /// One permission scope of the spec's Scopes table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Scope { $($variant),+ }

        impl Scope {
            pub const ALL: &'static [Scope] = &[$(Scope::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self { $(Scope::$variant => $name),+ }
            }
        }

        impl FromStr for Scope {
            type Err = UnknownScope;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s { $($name => Ok(Scope::$variant),)+ _ => Err(UnknownScope(s.to_owned())) }
            }
        }
    };
}

scopes! {
    ClaimsWrite => "claims:write",
    ClaimsRead => "claims:read",
    FraudRead => "fraud:read",
    UploadsWrite => "uploads:write",
    ProvidersWrite => "providers:write",
    ProvidersRead => "providers:read",
    RulebooksWrite => "rulebooks:write",
    RulebooksRead => "rulebooks:read",
    WorkflowManage => "workflow:manage",
    AuditRead => "audit:read",
    TenantConfigure => "tenant:configure",
}

/// A scope name that is not in the spec's table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope `{0}`")]
pub struct UnknownScope(pub String);

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A set of scopes, kept as a bit mask so that the per-request check is one AND.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScopeSet(u32);

impl ScopeSet {
    pub fn all() -> Self {
        Scope::ALL.iter().copied().collect()
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & Self::bit(scope) != 0
    }

    pub fn insert(&mut self, scope: Scope) {
        self.0 |= Self::bit(scope);
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL
            .iter()
            .copied()
            .filter(move |s| self.contains(*s))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Parses the space-separated form used in tokens and on the command line.
    pub fn parse_space_separated(s: &str) -> Result<Self, UnknownScope> {
        s.split_whitespace().map(str::parse).collect()
    }

    /// The space-separated form, in the order of the spec's table.
    pub fn to_space_separated(self) -> String {
        self.iter().map(Scope::as_str).collect::<Vec<_>>().join(" ")
    }

    fn bit(scope: Scope) -> u32 {
        1 << (scope as u32)
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        let mut set = ScopeSet::default();
        for s in iter {
            set.insert(s);
        }
        set
    }
}

impl Serialize for ScopeSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for ScopeSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<Scope>::deserialize(d)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_the_space_separated_form() {
        let set = ScopeSet::parse_space_separated("claims:read  tenant:configure").unwrap();
        assert!(set.contains(Scope::ClaimsRead));
        assert!(set.contains(Scope::TenantConfigure));
        assert!(!set.contains(Scope::ClaimsWrite));
        assert_eq!(set.to_space_separated(), "claims:read tenant:configure");
    }

    #[test]
    fn refuses_unknown_scopes() {
        assert_eq!(
            ScopeSet::parse_space_separated("claims:read admin"),
            Err(UnknownScope("admin".into()))
        );
    }

    #[test]
    fn all_holds_every_scope_of_the_spec() {
        assert_eq!(ScopeSet::all().iter().count(), 11);
    }
}

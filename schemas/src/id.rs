//! Identifiers supplied by clients. The contract fixes their form: 1-64 characters of
//! `[A-Za-z0-9._:-]`. A `ClientId` can only be built through [`ClientId::parse`], so any
//! value of the type is valid by construction.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a string is not a valid client-supplied id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 64 characters")]
    TooLong,
    #[error("may contain only letters, digits and . _ : -")]
    BadCharacter,
}

/// A validated client-supplied identifier (tenant id, claim id, provider id, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ClientId(String);

impl ClientId {
    pub const MAX_LEN: usize = 64;

    pub fn parse(s: impl Into<String>) -> Result<Self, IdError> {
        let s = s.into();
        if s.is_empty() {
            return Err(IdError::Empty);
        }
        if s.len() > Self::MAX_LEN {
            return Err(IdError::TooLong);
        }
        if !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        {
            return Err(IdError::BadCharacter);
        }
        Ok(Self(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The contract's form of a client-supplied id, as a JSON Schema pattern.
pub const CLIENT_ID_PATTERN: &str = "^[A-Za-z0-9._:-]{1,64}$";

impl utoipa::PartialSchema for ClientId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .min_length(Some(1))
            .max_length(Some(Self::MAX_LEN))
            .pattern(Some(CLIENT_ID_PATTERN))
            .description(Some("1-64 characters of [A-Za-z0-9._:-]"))
            .into()
    }
}

impl utoipa::ToSchema for ClientId {}

impl<'de> Deserialize<'de> for ClientId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ClientId::parse(s).map_err(serde::de::Error::custom)
    }
}

/// A tenant's id: a client id naming a tenant, parsed once where it enters (a token's
/// claims, a record on a topic, a row, the command line) and carried typed after, so
/// that a tenant can never be passed where a claim, member or provider is meant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TenantId(ClientId);

impl TenantId {
    pub fn parse(s: impl Into<String>) -> Result<Self, IdError> {
        ClientId::parse(s).map(Self)
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl std::ops::Deref for TenantId {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl AsRef<str> for TenantId {
    fn as_ref(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for TenantId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for TenantId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for TenantId {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<ClientId> for TenantId {
    fn from(id: ClientId) -> Self {
        Self(id)
    }
}

impl<'de> Deserialize<'de> for TenantId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ClientId::deserialize(d).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_contract_alphabet() {
        assert!(ClientId::parse("CLM-2026.01:a_b").is_ok());
        assert!(ClientId::parse("x".repeat(64)).is_ok());
    }

    #[test]
    fn refuses_everything_else() {
        assert_eq!(ClientId::parse(""), Err(IdError::Empty));
        assert_eq!(ClientId::parse("x".repeat(65)), Err(IdError::TooLong));
        assert_eq!(ClientId::parse("a b"), Err(IdError::BadCharacter));
        assert_eq!(ClientId::parse("é"), Err(IdError::BadCharacter));
        assert_eq!(ClientId::parse("a/b"), Err(IdError::BadCharacter));
    }

    #[test]
    fn a_tenant_id_is_a_client_id_that_reads_as_text() {
        let t = TenantId::parse("acme").unwrap();
        assert_eq!(t, "acme");
        assert_eq!(format!("{t}/CLM-1"), "acme/CLM-1");
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"acme\"");
        assert!(serde_json::from_str::<TenantId>("\"a/b\"").is_err());
        assert_eq!(TenantId::parse(""), Err(IdError::Empty));
    }
}

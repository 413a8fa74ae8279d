//! The members' accumulators: per member and calendar year, the claims counted in it
//! with their usage (see [`MemberYear`]). Kept in memory by the snapshot stage, which
//! takes every decision of a member in order; written to the store with the decisions
//! (a row per counted claim, from which it is restored on start and when partitions
//! move) and to the compacted topic `state.accumulators` (a record per counted claim,
//! for analysts and as the log of every change). A record per claim, rather than one
//! per member and year, makes the order in which two writers' records land irrelevant,
//! and a member's year is only as large as the claims counted in it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::adjudication::{Counted, MemberYear, Usage};
use crate::stages::StageError;
use crate::store::{Store, StoreError};

/// A value of `state.accumulators` (`accumulator.avsc`): one claim counted in a
/// member's year, or taken out of it again (`reversed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub tenant_id: String,
    pub member_id: String,
    pub year: i32,
    pub claim_id: String,
    pub seq: u64,
    #[serde(default)]
    pub reversed: bool,
    pub usage: Usage,
}

impl Entry {
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.tenant_id, self.member_id, self.year, self.claim_id
        )
    }
}

/// The members' years, by tenant, member and year. Looked up by borrowed names, so
/// that deciding a claim allocates nothing here unless the member's year is new.
///
/// A member's years are a vector of exactly as many as it has (one or two, as a rule):
/// a payer has millions of members, most with a claim or two, and a `BTreeMap`'s first
/// node holds room for eleven years, some 1.5 KB a member.
#[derive(Debug, Default)]
pub struct Accumulators {
    tenants: HashMap<String, HashMap<String, Vec<(i32, MemberYear)>>>,
}

/// The state as the snapshot stage and, when it runs in the same process, the fused
/// chain share it. Held only while a batch is adjudicated, never across an await.
pub type Shared = Arc<Mutex<Accumulators>>;

impl Accumulators {
    pub fn year(&self, tenant: &str, member: &str, year: i32) -> Option<&MemberYear> {
        let years = self.tenants.get(tenant)?.get(member)?;
        years.iter().find(|(y, _)| *y == year).map(|(_, y)| y)
    }

    pub fn year_mut(&mut self, tenant: &str, member: &str, year: i32) -> &mut MemberYear {
        if !self.tenants.contains_key(tenant) {
            self.tenants.insert(tenant.to_owned(), HashMap::new());
        }
        let members = self.tenants.get_mut(tenant).expect("inserted above");
        if !members.contains_key(member) {
            members.insert(member.to_owned(), Vec::with_capacity(1));
        }
        let years = members.get_mut(member).expect("inserted above");
        let at = match years.iter().position(|(y, _)| *y == year) {
            Some(at) => at,
            None => {
                years.reserve_exact(1);
                years.push((year, MemberYear::default()));
                years.len() - 1
            }
        };
        &mut years[at].1
    }

    /// Takes `claim_id` out of whichever of the member's years counted it: the year and
    /// its count, or none when no year did.
    pub fn take(&mut self, tenant: &str, member: &str, claim_id: &str) -> Option<(i32, Counted)> {
        let years = self.tenants.get_mut(tenant)?.get_mut(member)?;
        years
            .iter_mut()
            .find_map(|(year, y)| y.take(claim_id).map(|c| (*year, c)))
    }

    /// The members with a year kept.
    pub fn members(&self) -> usize {
        self.tenants.values().map(HashMap::len).sum()
    }

    /// The state from the latest record of each key.
    pub fn from_entries(entries: impl IntoIterator<Item = Entry>) -> Self {
        let mut state = Self::default();
        for e in entries.into_iter().filter(|e| !e.reversed) {
            let year = state.year_mut(&e.tenant_id, &e.member_id, e.year);
            year.restore(
                &e.claim_id,
                Counted {
                    seq: e.seq,
                    usage: e.usage,
                },
            );
        }
        state
    }

    /// Restores the state from the store's copy, which is written in the transaction
    /// that holds the decisions: the years as they stand after the last batch the store
    /// committed, whatever of that batch's records reached `state.accumulators` (on
    /// Kafka they land partition by partition, and a crash may come between). A batch
    /// redelivered after a restart then finds each claim's year as it found it the
    /// first time, and is decided the same way. A row that does not parse is fatal:
    /// adjudicating against a year that misses a claim would pay a deductible twice. A
    /// database that does not answer is transient: the restore is tried again.
    pub async fn restore(store: &Store) -> Result<Self, StageError> {
        let mut state = Self::default();
        store
            .counted_claims(|c| {
                state
                    .year_mut(&c.tenant_id, &c.member_id, c.year)
                    .restore(&c.claim_id, c.counted);
            })
            .await
            .map_err(|e| match e {
                StoreError::Corrupt(_) => {
                    StageError::Fatal(format!("restoring the accumulators: {e}"))
                }
                e => e.into(),
            })?;
        tracing::info!(members = state.members(), "Accumulators restored.");
        Ok(state)
    }

    /// [`Self::restore`] into a new shared state.
    pub async fn shared(store: &Store) -> Result<Shared, StageError> {
        Ok(Arc::new(Mutex::new(Self::restore(store).await?)))
    }
}

/// Locks the shared state. A panic while it was held left it as it was between two
/// claims (each claim's change is a few field updates), so the lock is taken anyway.
pub fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Accumulators> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

//! The audit log: every state change appends a record, and a tenant's records form one
//! hash chain. Record `seq` n carries `prev_hash` = the `hash` of record n-1 (64 zeros
//! for the first) and `hash` = SHA-256 over its canonical form (see [`canonical`]), so
//! an edited, inserted or deleted record breaks the chain at or after it.
//!
//! Appending reads and moves the tenant's chain head (`audit_heads`) in the caller's
//! transaction. On PostgreSQL the head row is locked (`FOR UPDATE`), so concurrent
//! writers of one tenant append one after the other; SQLite has one writer anyway. The
//! head is always the last row a transaction locks (the append is its last statement),
//! and several tenants are locked in id order, so appends cannot deadlock.

use sha2::{Digest, Sha256};

use super::{placeholders, values_list, AnyQuery, Backend, Store, StoreError};

/// `prev_hash` of a tenant's first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Records per INSERT: 11 values each.
const ROWS_PER_STATEMENT: usize = 1000;

/// A state change to record.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub audit_id: String,
    pub tenant_id: String,
    pub at: i64,
    /// A user id, or `pipeline` for automatic processing.
    pub actor: String,
    pub action: String,
    pub entity_type: String,
    pub entity_id: String,
    /// JSON, hashed as stored.
    pub details: String,
}

impl AuditEntry {
    /// An entry with a fresh id, for changes made through the API.
    pub fn new(
        tenant_id: &str,
        actor: &str,
        action: &str,
        entity: (&str, &str),
        details: serde_json::Value,
    ) -> Self {
        Self {
            audit_id: format!("aud_{}", uuid::Uuid::new_v4().simple()),
            tenant_id: tenant_id.to_owned(),
            at: crate::clock::now_ms(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            entity_type: entity.0.to_owned(),
            entity_id: entity.1.to_owned(),
            details: details.to_string(),
        }
    }
}

/// A stored record with its place in the chain.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AuditRecord {
    pub audit_id: String,
    pub tenant_id: String,
    pub seq: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub entity_type: String,
    pub entity_id: String,
    pub details: String,
    pub prev_hash: String,
    pub hash: String,
}

/// The bytes a record's hash covers: a JSON array of its fields in a fixed order, with
/// `details` as the stored text. JSON escaping keeps the fields apart, so no two
/// different records share a canonical form. Written by [`PreparedEntry`], which the
/// append uses too, so that there is one encoding of it.
pub fn canonical(r: &AuditRecord) -> String {
    PreparedEntry::from(r.entry()).canonical_at(r.seq, &r.prev_hash)
}

pub fn hash_of(r: &AuditRecord) -> String {
    lower_hex(&Sha256::digest(canonical(r).as_bytes()))
}

impl AuditRecord {
    /// The entry this record was appended from.
    fn entry(&self) -> AuditEntry {
        AuditEntry {
            audit_id: self.audit_id.clone(),
            tenant_id: self.tenant_id.clone(),
            at: self.at,
            actor: self.actor.clone(),
            action: self.action.clone(),
            entity_type: self.entity_type.clone(),
            entity_id: self.entity_id.clone(),
            details: self.details.clone(),
        }
    }
}

/// An entry with its canonical form serialised but for its place in the chain (`seq`
/// and `prev_hash`), ahead of the transaction that appends it: the append runs while
/// SQLite's one writer waits, and escaping a record's details was most of its work.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedEntry {
    pub entry: AuditEntry,
    /// The canonical form up to `seq`: `[` and the tenant.
    head: String,
    /// From after `seq` to before `prev_hash`, with the commas around it.
    middle: String,
}

impl From<AuditEntry> for PreparedEntry {
    fn from(entry: AuditEntry) -> Self {
        let head = format!("[{},", json(&entry.tenant_id));
        // `,"audit_id",at,"actor","action","entity_type","entity_id","details",`: written
        // straight into one buffer, as this runs for every claim twice.
        let mut middle = Vec::with_capacity(128 + entry.details.len() * 9 / 8);
        middle.push(b',');
        push_json(&mut middle, &entry.audit_id);
        middle.push(b',');
        middle.extend_from_slice(entry.at.to_string().as_bytes());
        for field in [
            &entry.actor,
            &entry.action,
            &entry.entity_type,
            &entry.entity_id,
            &entry.details,
        ] {
            middle.push(b',');
            push_json(&mut middle, field);
        }
        middle.push(b',');
        Self {
            entry,
            head,
            middle: String::from_utf8(middle).unwrap_or_else(|_| unreachable!("JSON is UTF-8")),
        }
    }
}

/// Appends `s` as a JSON string.
fn push_json(out: &mut Vec<u8>, s: &str) {
    // Writing a string into a vector cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

impl PreparedEntry {
    /// The canonical form of the record this entry becomes at `seq` after `prev_hash`.
    fn canonical_at(&self, seq: i64, prev_hash: &str) -> String {
        format!("{}{seq}{}{}]", self.head, self.middle, json(prev_hash))
    }

    /// The hash of the record this entry becomes at `seq` after `prev_hash`: of
    /// [`Self::canonical_at`], fed in its parts rather than copied into one string
    /// first, as this runs while the writer waits.
    fn hash_at(&self, seq: i64, prev_hash: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.head.as_bytes());
        h.update(seq.to_string().as_bytes());
        h.update(self.middle.as_bytes());
        h.update(json(prev_hash).as_bytes());
        h.update(b"]");
        lower_hex(&h.finalize())
    }
}

/// A digest as lowercase hex (`hex::encode` goes a char at a time).
fn lower_hex(digest: &[u8]) -> String {
    let mut out = vec![0; digest.len() * 2];
    // The buffer is exactly twice the input, which is all `encode_to_slice` asks.
    hex::encode_to_slice(digest, &mut out).unwrap_or_default();
    String::from_utf8(out).unwrap_or_default()
}

/// A string as the canonical form writes it.
fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Where the walk of a chain found it broken.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainBreak {
    pub seq: i64,
    pub audit_id: String,
    pub problem: String,
}

/// Appends `entries` to their tenants' chains inside `tx`, skipping any whose
/// `audit_id` is already recorded (a redelivered decision appends nothing).
pub(crate) async fn append(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    entries: &[AuditEntry],
) -> Result<(), StoreError> {
    let prepared: Vec<PreparedEntry> = entries.iter().cloned().map(Into::into).collect();
    let prepared: Vec<&PreparedEntry> = prepared.iter().collect();
    append_checked(tx, backend, &prepared, true).await
}

/// The time and `details` of those of `ids` already recorded.
pub(crate) async fn recorded_details(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    ids: &[&str],
) -> Result<std::collections::HashMap<String, (i64, String)>, StoreError> {
    let mut found = std::collections::HashMap::new();
    for chunk in ids.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "SELECT audit_id, at, details FROM audit_records WHERE audit_id IN ({})",
            placeholders(backend, 1, chunk.len())
        );
        let mut q = sqlx::query_as::<_, (String, i64, String)>(&sql);
        for id in chunk {
            q = q.bind(*id);
        }
        found.extend(
            q.fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(|(id, at, details)| (id, (at, details))),
        );
    }
    Ok(found)
}

/// [`append`], optionally without looking the ids up first: for entries the caller
/// knows are new (a claim's intake, whose row was inserted in the same transaction).
async fn append_checked(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    entries: &[&PreparedEntry],
    check: bool,
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut known: std::collections::HashSet<String> = Default::default();
    for chunk in entries.chunks(ROWS_PER_STATEMENT).filter(|_| check) {
        let sql = format!(
            "SELECT audit_id FROM audit_records WHERE audit_id IN ({})",
            placeholders(backend, 1, chunk.len())
        );
        let mut q = sqlx::query_scalar::<_, String>(&sql);
        for e in chunk {
            q = q.bind(&e.entry.audit_id);
        }
        known.extend(q.fetch_all(&mut **tx).await?);
    }
    let mut by_tenant: std::collections::BTreeMap<&str, Vec<&PreparedEntry>> = Default::default();
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    for e in entries {
        // An id twice in one call is recorded once.
        let id = e.entry.audit_id.as_str();
        if !known.contains(id) && seen.insert(id) {
            by_tenant.entry(&e.entry.tenant_id).or_default().push(e);
        }
    }
    // BTreeMap: tenants in id order, the lock order.
    for (tenant, list) in by_tenant {
        // The head, made at genesis for a tenant's first record, in one statement: the
        // update changes nothing but locks the row (PostgreSQL's transactions run side
        // by side; SQLite's writer holds the file), and each statement is a round trip
        // to SQLite's thread while every other writer waits.
        let (mut seq, mut prev): (i64, String) = sqlx::query_as(
            "INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ($1, 0, $2) \
             ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_heads.seq RETURNING seq, hash",
        )
        .bind(tenant)
        .bind(GENESIS)
        .fetch_one(&mut **tx)
        .await?;
        // Each record's place in the chain: its seq, the hash before it and its own.
        let mut placed = Vec::with_capacity(list.len());
        for e in &list {
            seq += 1;
            let hash = e.hash_at(seq, &prev);
            placed.push((seq, std::mem::replace(&mut prev, hash.clone()), hash));
        }
        for (chunk, places) in list
            .chunks(ROWS_PER_STATEMENT)
            .zip(placed.chunks(ROWS_PER_STATEMENT))
        {
            let sql = format!(
                "INSERT INTO audit_records (audit_id, tenant_id, seq, at, actor, action, entity_type, entity_id, \
                 details, prev_hash, hash) VALUES {}",
                values_list(backend, chunk.len(), 11)
            );
            let mut q = sqlx::query(&sql);
            for (e, (seq, prev_hash, hash)) in chunk.iter().map(|e| &e.entry).zip(places) {
                q = q
                    .bind(e.audit_id.as_str())
                    .bind(e.tenant_id.as_str())
                    .bind(*seq)
                    .bind(e.at)
                    .bind(e.actor.as_str())
                    .bind(e.action.as_str())
                    .bind(e.entity_type.as_str())
                    .bind(e.entity_id.as_str())
                    .bind(e.details.as_str())
                    .bind(prev_hash.as_str())
                    .bind(hash.as_str());
            }
            q.execute(&mut **tx).await?;
        }
        sqlx::query("UPDATE audit_heads SET seq = $1, hash = $2 WHERE tenant_id = $3")
            .bind(seq)
            .bind(&prev)
            .bind(tenant)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

const COLUMNS: &str =
    "audit_id, tenant_id, seq, at, actor, action, entity_type, entity_id, details, prev_hash, hash";

/// A page of a tenant's audit log, oldest first.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub entity_id: Option<String>,
    pub since_ms: Option<i64>,
    /// Records after this `seq`.
    pub after_seq: Option<i64>,
    pub limit: usize,
}

impl Store {
    /// Appends entries in a transaction of their own.
    pub async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        let mut tx = self.writer().begin().await?;
        append(&mut tx, self.backend(), entries).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Runs one change and, when it changed a row, appends its audit record, in one
    /// transaction. Answers the rows changed.
    pub(crate) async fn audited<'q>(
        &self,
        change: AnyQuery<'q>,
        entry: AuditEntry,
    ) -> Result<u64, StoreError> {
        self.audited_also(change, None, entry).await
    }

    /// [`Self::audited`] with a second statement in the same transaction, run when the
    /// change changed something.
    pub(crate) async fn audited_also<'q>(
        &self,
        change: AnyQuery<'q>,
        also: Option<AnyQuery<'q>>,
        entry: AuditEntry,
    ) -> Result<u64, StoreError> {
        let mut tx = self.writer().begin().await?;
        let changed = change.execute(&mut *tx).await?.rows_affected();
        if changed > 0 {
            if let Some(also) = also {
                also.execute(&mut *tx).await?;
            }
            append(&mut tx, self.backend(), &[entry]).await?;
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Appends entries known to be new (no id lookup) inside the caller's transaction.
    pub(crate) async fn append_new_audit_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        entries: &[&PreparedEntry],
    ) -> Result<(), StoreError> {
        append_checked(tx, self.backend(), entries, false).await
    }

    /// Appends entries inside the caller's transaction, as its last statement.
    pub(crate) async fn append_audit_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        entries: &[AuditEntry],
    ) -> Result<(), StoreError> {
        append(tx, self.backend(), entries).await
    }

    pub async fn audit_record(
        &self,
        tenant_id: &str,
        audit_id: &str,
    ) -> Result<Option<AuditRecord>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM audit_records WHERE tenant_id = $1 AND audit_id = $2 AND seq IS NOT NULL"
        ))
        .bind(tenant_id)
        .bind(audit_id)
        .fetch_optional(self.reader())
        .await?)
    }

    pub async fn audit_records(
        &self,
        tenant_id: &str,
        f: &AuditFilter,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let mut sql = format!(
            "SELECT {COLUMNS} FROM audit_records WHERE tenant_id = $1 AND seq IS NOT NULL AND seq > $2"
        );
        let mut n = 2;
        if f.entity_id.is_some() {
            n += 1;
            sql.push_str(&format!(" AND entity_id = ${n}"));
        }
        if f.since_ms.is_some() {
            n += 1;
            sql.push_str(&format!(" AND at >= ${n}"));
        }
        n += 1;
        sql.push_str(&format!(" ORDER BY seq LIMIT ${n}"));
        let mut q = sqlx::query_as::<_, AuditRecord>(&sql)
            .bind(tenant_id)
            .bind(f.after_seq.unwrap_or(0));
        if let Some(e) = &f.entity_id {
            q = q.bind(e);
        }
        if let Some(s) = f.since_ms {
            q = q.bind(s);
        }
        Ok(q.bind(f.limit as i64).fetch_all(self.reader()).await?)
    }

    /// Walks a tenant's whole chain, a page at a time, and answers how many records
    /// verified or where it first breaks.
    pub async fn verify_audit(
        &self,
        tenant_id: &str,
    ) -> Result<Result<u64, ChainBreak>, StoreError> {
        let head: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, hash FROM audit_heads WHERE tenant_id = $1")
                .bind(tenant_id)
                .fetch_optional(self.reader())
                .await?;
        let mut state = ChainWalk::default();
        let mut after = 0;
        loop {
            let page = self
                .audit_records(
                    tenant_id,
                    &AuditFilter {
                        after_seq: Some(after),
                        limit: 5000,
                        ..Default::default()
                    },
                )
                .await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            if let Err(b) = state.feed(&page) {
                return Ok(Err(b));
            }
        }
        Ok(state.finish(head.as_ref().map(|(s, h)| (*s, h.as_str()))))
    }
}

/// [`verify_chain`] over pages.
#[derive(Debug, Default)]
struct ChainWalk {
    last: Option<AuditRecord>,
    count: u64,
}

impl ChainWalk {
    fn feed(&mut self, page: &[AuditRecord]) -> Result<(), ChainBreak> {
        // The previous page's last record links to this page's first.
        let (prev, seq0) = self
            .last
            .as_ref()
            .map_or((GENESIS.to_owned(), 1), |l| (l.hash.clone(), l.seq + 1));
        walk_from(page, &prev, seq0)?;
        self.count += page.len() as u64;
        if let Some(l) = page.last() {
            self.last = Some(l.clone());
        }
        Ok(())
    }

    fn finish(self, head: Option<(i64, &str)>) -> Result<u64, ChainBreak> {
        if let Some((seq, hash)) = head {
            let (last_seq, last_hash) = self
                .last
                .as_ref()
                .map_or((0, GENESIS), |r| (r.seq, r.hash.as_str()));
            if seq != last_seq || hash != last_hash {
                return Err(ChainBreak {
                    seq: last_seq + 1,
                    audit_id: String::new(),
                    problem: format!(
                        "the chain ends at seq {last_seq} but its head says {seq}: records were removed from the end"
                    ),
                });
            }
        }
        Ok(self.count)
    }
}

/// Checks `records` as a stretch of a chain whose record before them has hash `prev`
/// and whose first record must have `seq0`.
fn walk_from(records: &[AuditRecord], prev: &str, seq0: i64) -> Result<(), ChainBreak> {
    let mut prev = prev;
    for (expected, r) in (seq0..).zip(records) {
        let fail = |problem: String| ChainBreak {
            seq: r.seq,
            audit_id: r.audit_id.clone(),
            problem,
        };
        if r.seq != expected {
            return Err(fail(format!(
                "record {expected} is missing before it (found seq {})",
                r.seq
            )));
        }
        if r.prev_hash != prev {
            return Err(fail(
                "its prev_hash does not match the hash of the record before it".into(),
            ));
        }
        if hash_of(r) != r.hash {
            return Err(fail(
                "its content does not match its hash (the record was altered)".into(),
            ));
        }
        prev = &r.hash;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prepared entry hashes, at its place, exactly as the record it becomes: the walk
    /// that verifies a chain hashes the stored records.
    #[test]
    fn a_prepared_entry_hashes_as_its_record() {
        let entry = AuditEntry {
            audit_id: "aud_1".into(),
            tenant_id: "acme \"quoted\"".into(),
            at: -5,
            actor: "u\u{1}ser".into(),
            action: "claim.decided".into(),
            entity_type: "claim".into(),
            entity_id: "CLM-1\n".into(),
            details: r#"{"fraud_score":0.25,"note":"é\\"}"#.into(),
        };
        let prev = hash_of(&AuditRecord {
            audit_id: "aud_0".into(),
            tenant_id: entry.tenant_id.clone(),
            seq: 41,
            at: 0,
            actor: String::new(),
            action: String::new(),
            entity_type: String::new(),
            entity_id: String::new(),
            details: "{}".into(),
            prev_hash: GENESIS.into(),
            hash: String::new(),
        });
        let record = AuditRecord {
            audit_id: entry.audit_id.clone(),
            tenant_id: entry.tenant_id.clone(),
            seq: 42,
            at: entry.at,
            actor: entry.actor.clone(),
            action: entry.action.clone(),
            entity_type: entry.entity_type.clone(),
            entity_id: entry.entity_id.clone(),
            details: entry.details.clone(),
            prev_hash: prev.clone(),
            hash: String::new(),
        };
        let prepared = PreparedEntry::from(entry);
        assert_eq!(prepared.hash_at(42, &prev), hash_of(&record));
        assert_ne!(prepared.hash_at(43, &prev), hash_of(&record));
    }

    /// Chains already stored were hashed over a `json!` array; the canonical form must
    /// stay byte for byte what it was, or every stored chain would read as broken.
    #[test]
    fn the_canonical_form_is_the_json_array_of_the_fields() {
        let r = AuditRecord {
            audit_id: "aud_1".into(),
            tenant_id: "acme \"quoted\"".into(),
            seq: 7,
            at: 1_700_000_000_000,
            actor: "pipeline".into(),
            action: "claim.decided".into(),
            entity_type: "claim".into(),
            entity_id: "CLM-1\n".into(),
            details: r#"{"fraud_score":0.25,"note":"é\\"}"#.into(),
            prev_hash: GENESIS.into(),
            hash: String::new(),
        };
        let before = serde_json::json!([
            r.tenant_id,
            r.seq,
            r.audit_id,
            r.at,
            r.actor,
            r.action,
            r.entity_type,
            r.entity_id,
            r.details,
            r.prev_hash
        ])
        .to_string();
        assert_eq!(canonical(&r), before);
        assert_eq!(hash_of(&r), hex::encode(Sha256::digest(before.as_bytes())));
    }
}

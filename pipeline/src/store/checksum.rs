//! `claims snapshot checksum` (contract part 2: Operations and analysts): a digest per
//! snapshot table that is the same for the live store and one rebuilt from the topics.
//!
//! A row's digest is the SHA-256 of its columns' text; a table's is the sum of its
//! rows' digests (four 64-bit lanes, each wrapping), so the row order does not count.
//! Columns a write stamps with its own time or place (`updated_at`, the audit chain's
//! `seq` and hashes, which follow the order writers took the chain) are left out; ids
//! are all made before the topics carry them, so they stay in. Rows are read a page at
//! a time in key order, so a table of millions is never held at once.

use sha2::{Digest, Sha256};

use super::{Store, StoreError};

/// One table's checksum.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableChecksum {
    pub table: &'static str,
    pub rows: u64,
    pub digest: String,
}

/// A snapshot table as the checksum reads it.
struct Table {
    /// Its name in the output.
    label: &'static str,
    from: &'static str,
    filter: &'static str,
    /// The primary key, in order, with whether each part is an integer.
    key: &'static [(&'static str, bool)],
    /// The columns digested, the key's among them.
    columns: &'static [&'static str],
}

const TABLES: [Table; 4] = [
    Table {
        label: "claims",
        from: "claims",
        filter: "",
        key: &[("tenant_id", false), ("claim_id", false)],
        columns: &[
            "tenant_id",
            "claim_id",
            "member_id",
            "provider_id",
            "claim_amount",
            "service_date",
            "submission",
            "rulebook_id",
            "rulebook_version",
            "status",
            "outcome",
            "approved_amount",
            "fraud_score",
            "fraud",
            "audit_id",
            "reasons",
            "task_id",
            "received_at",
            "version",
            "lines",
            "pricing",
            "frequency",
            "replaces_claim_id",
            "superseded_by",
            "facts",
        ],
    },
    Table {
        label: "decisions",
        from: "audit_records",
        filter: "action IN ('claim.decided', 'claim.approved', 'claim.declined')",
        key: &[("audit_id", false)],
        columns: &[
            "audit_id",
            "tenant_id",
            "at",
            "actor",
            "action",
            "entity_type",
            "entity_id",
            "details",
        ],
    },
    Table {
        label: "tasks",
        from: "review_tasks",
        filter: "",
        key: &[("task_id", false)],
        columns: &[
            "task_id",
            "tenant_id",
            "claim_id",
            "status",
            "priority",
            "reasons",
            "assignee",
            "created_at",
            "decision",
            "decided_at",
            "note",
            "approved_amount",
        ],
    },
    Table {
        label: "accumulators",
        from: "member_accumulators",
        filter: "",
        key: &[
            ("tenant_id", false),
            ("member_id", false),
            ("year", true),
            ("claim_id", false),
        ],
        columns: &[
            "tenant_id",
            "member_id",
            "year",
            "claim_id",
            "deductible",
            "out_of_pocket",
            "paid",
            "visits",
        ],
    },
];

/// Rows read per query.
const PAGE: i64 = 5000;

impl Store {
    /// The checksum of each snapshot table: claims, decisions, tasks, accumulators.
    pub async fn snapshot_checksums(&self) -> Result<Vec<TableChecksum>, StoreError> {
        let mut out = Vec::with_capacity(TABLES.len());
        for t in &TABLES {
            out.push(self.checksum(t).await?);
        }
        Ok(out)
    }

    async fn checksum(&self, t: &Table) -> Result<TableChecksum, StoreError> {
        let keys: Vec<&str> = t.key.iter().map(|(k, _)| *k).collect();
        let select: Vec<String> = t
            .key
            .iter()
            .map(|(k, int)| match int {
                true => format!("CAST({k} AS BIGINT)"),
                false => k.to_string(),
            })
            .chain(t.columns.iter().map(|c| format!("CAST({c} AS TEXT)")))
            .collect();
        // Qualified: on PostgreSQL a bare name would also match the select list's.
        let order = keys
            .iter()
            .map(|k| format!("t.{k}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut sum = [0u64; 4];
        let mut rows = 0u64;
        let mut last: Option<Vec<Key>> = None;
        loop {
            let mut conditions: Vec<String> = Vec::new();
            if !t.filter.is_empty() {
                conditions.push(t.filter.to_owned());
            }
            if last.is_some() {
                let params: Vec<String> = (1..=keys.len()).map(|i| format!("${i}")).collect();
                conditions.push(format!("({order}) > ({})", params.join(", ")));
            }
            let sql = format!(
                "SELECT {} FROM {} AS t{} ORDER BY {order} LIMIT {PAGE}",
                select.join(", "),
                t.from,
                if conditions.is_empty() {
                    String::new()
                } else {
                    format!(" WHERE {}", conditions.join(" AND "))
                },
            );
            let mut q = sqlx::query(&sql);
            for k in last.iter().flatten() {
                q = match k {
                    Key::Text(s) => q.bind(s.clone()),
                    Key::Int(i) => q.bind(*i),
                };
            }
            let page = q.fetch_all(self.reader()).await?;
            let Some(end) = page.last() else { break };
            last = Some(
                t.key
                    .iter()
                    .enumerate()
                    .map(|(i, (_, int))| {
                        Ok(if *int {
                            Key::Int(sqlx::Row::try_get(end, i)?)
                        } else {
                            Key::Text(sqlx::Row::try_get(end, i)?)
                        })
                    })
                    .collect::<Result<_, sqlx::Error>>()?,
            );
            for row in &page {
                let values = (keys.len()..keys.len() + t.columns.len())
                    .map(|i| sqlx::Row::try_get::<Option<String>, _>(row, i))
                    .collect::<Result<Vec<_>, _>>()?;
                add(&mut sum, &row_digest(&values));
                rows += 1;
            }
            if (page.len() as i64) < PAGE {
                break;
            }
        }
        Ok(TableChecksum {
            table: t.label,
            rows,
            digest: sum.iter().map(|l| format!("{l:016x}")).collect(),
        })
    }
}

enum Key {
    Text(String),
    Int(i64),
}

/// A row's digest: its values as one JSON array (a missing value is `null`, told
/// apart from the text "null").
fn row_digest(values: &[Option<String>]) -> [u8; 32] {
    let text = serde_json::to_string(values).unwrap_or_default();
    Sha256::digest(text.as_bytes()).into()
}

fn add(sum: &mut [u64; 4], digest: &[u8; 32]) {
    for (lane, chunk) in sum.iter_mut().zip(digest.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *lane = lane.wrapping_add(u64::from_be_bytes(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tables_digest_does_not_depend_on_row_order_but_on_every_value() {
        let rows = [
            vec![Some("a".to_owned()), None],
            vec![Some("b".to_owned()), Some("1".to_owned())],
            vec![Some("c".to_owned()), Some("null".to_owned())],
        ];
        let digest = |order: &[usize]| {
            let mut sum = [0u64; 4];
            for i in order {
                add(&mut sum, &row_digest(&rows[*i]));
            }
            sum
        };
        assert_eq!(digest(&[0, 1, 2]), digest(&[2, 0, 1]));
        assert_ne!(digest(&[0, 1, 2]), digest(&[0, 1]));
        assert_ne!(
            row_digest(&[Some("null".into())]),
            row_digest(&[None]),
            "a missing value is not the text null"
        );
    }
}

//! The order `claims replay` applies `claims.decided` in: a decision made outside the chain
//! (an officer's, or a reprocessed claim's: any later version) waits for the record of
//! it as the store wrote it, its written twin, which then stands in its place.
//!
//! Why: on the embedded default the chain counts an automatic decision in its member's
//! year when it decides it and puts it on the topic when it commits, a batch later,
//! while the snapshot stage counts an officer's decision when it reads it. So an
//! officer's approval can be on the topic before an automatic decision of the same
//! member that was counted first; applied in topic order, the rebuild would share the
//! member's deductible between the two claims otherwise than the live store did. The
//! snapshot stage of a fused process therefore writes each such decision it applies
//! back onto the topic as written (benefits applied, count made), and a written
//! decision is restored as it is, in whatever order. Where no twin follows (separate
//! stages, or Kafka, whose snapshot stage applies the topic in order), a waiting
//! decision is applied before the next unwritten decision of its member, or at the end,
//! which is its place in the topic's order for all the member's adjudication.
//!
//! Pure: pages of decisions in, decisions to apply out.

use std::collections::HashMap;

use crate::model::Decision;

/// Decisions waiting for their written twin, per tenant and member, in topic order.
#[derive(Debug, Default)]
pub struct Twins {
    waiting: HashMap<(String, String), Vec<Decision>>,
    /// Decisions that a written twin stood in for.
    pub replaced: u64,
}

impl Twins {
    /// The decisions of `page` (read in topic order) that can be applied now, in the
    /// order to apply them.
    pub fn order(&mut self, page: Vec<Decision>) -> Vec<Decision> {
        let mut ready = Vec::with_capacity(page.len());
        for d in page {
            let member = (d.tenant_id.to_string(), d.member_id.clone());
            if d.written {
                if let Some(waiting) = self.waiting.get_mut(&member) {
                    let twin = waiting
                        .iter()
                        .position(|w| w.claim_id == d.claim_id && w.version == d.version);
                    if let Some(at) = twin {
                        // Those before it got no twin: the store did not hold them.
                        ready.extend(waiting.drain(..at));
                        waiting.remove(0);
                        self.replaced += 1;
                        if waiting.is_empty() {
                            self.waiting.remove(&member);
                        }
                    }
                }
                ready.push(d);
            } else if made_beside_the_chain(&d) {
                self.waiting.entry(member).or_default().push(d);
            } else {
                ready.extend(self.waiting.remove(&member).unwrap_or_default());
                ready.push(d);
            }
        }
        ready
    }

    /// Every decision still waiting: no twin came for it. Members' years are apart, so
    /// the members' order among themselves does not matter.
    pub fn rest(&mut self) -> Vec<Decision> {
        self.waiting.drain().flat_map(|(_, w)| w).collect()
    }
}

/// Whether `d` was made outside the chain and applied by the snapshot stage as read (an
/// officer's or a reprocessed claim's: a later version, not written): what gets a twin,
/// and what a rebuild holds back for one.
fn made_beside_the_chain(d: &Decision) -> bool {
    !d.written && d.version > 1
}

/// The decisions among `decisions` (in the order applied, `held` by the store) that a
/// fused process's snapshot stage writes back as written twins.
pub fn needing_twins<'a>(
    decisions: &'a [Decision],
    held: &'a [bool],
) -> impl Iterator<Item = &'a Decision> + 'a {
    decisions
        .iter()
        .zip(held)
        .filter(|(d, held)| **held && made_beside_the_chain(d))
        .map(|(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(member: &str, claim: &str, version: i64, written: bool) -> Decision {
        Decision {
            audit_id: format!("aud_{claim}_{version}_{written}"),
            written,
            ..Decision::sample(claim, member, version)
        }
    }

    fn ids(ds: &[Decision]) -> Vec<&str> {
        ds.iter().map(|d| d.audit_id.as_str()).collect()
    }

    #[test]
    fn an_officers_decision_is_applied_from_its_twin_after_what_the_chain_counted_before_it() {
        let mut twins = Twins::default();
        // The approval of C-1 reached the topic first, the chain's decision on C-2 (of
        // the same member, counted first) at its commit, then the approval's twin.
        let ready = twins.order(vec![
            decision("M-1", "C-1", 2, false),
            decision("M-1", "C-2", 1, true),
        ]);
        assert_eq!(ids(&ready), ["aud_C-2_1_true"]);
        let ready = twins.order(vec![decision("M-1", "C-1", 2, true)]);
        assert_eq!(ids(&ready), ["aud_C-1_2_true"]);
        assert!(twins.rest().is_empty());
        assert_eq!(twins.replaced, 1);
    }

    #[test]
    fn without_twins_the_topics_order_holds_for_each_member() {
        let mut twins = Twins::default();
        let ready = twins.order(vec![
            decision("M-1", "C-1", 2, false),
            decision("M-2", "C-3", 1, false),
            decision("M-1", "C-2", 1, false),
            decision("M-1", "C-4", 3, false),
        ]);
        assert_eq!(
            ids(&ready),
            ["aud_C-3_1_false", "aud_C-1_2_false", "aud_C-2_1_false"]
        );
        assert_eq!(ids(&twins.rest()), ["aud_C-4_3_false"]);
        assert_eq!(twins.replaced, 0);
    }

    #[test]
    fn a_waiting_decision_without_a_twin_goes_before_a_later_ones_twin() {
        let mut twins = Twins::default();
        let ready = twins.order(vec![
            decision("M-1", "C-1", 2, false),
            decision("M-1", "C-2", 2, false),
            decision("M-1", "C-2", 2, true),
        ]);
        assert_eq!(ids(&ready), ["aud_C-1_2_false", "aud_C-2_2_true"]);
        assert!(twins.rest().is_empty());
    }

    #[test]
    fn only_held_decisions_made_outside_the_chain_get_twins() {
        let ds = [
            decision("M-1", "C-1", 2, false),
            decision("M-1", "C-2", 1, false),
            decision("M-1", "C-3", 2, true),
            decision("M-1", "C-4", 2, false),
        ];
        let twins: Vec<&Decision> = needing_twins(&ds, &[true, true, true, false]).collect();
        assert_eq!(
            twins
                .iter()
                .map(|d| d.claim_id.as_str())
                .collect::<Vec<_>>(),
            ["C-1"]
        );
    }
}

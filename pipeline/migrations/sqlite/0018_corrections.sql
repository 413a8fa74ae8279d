-- Corrected and voided claims (contract part 2): what a submission is to the claims
-- before it, and, on the claim it replaces, the replacement or void that did, set in
-- the transaction that accepts it (so that a claim is replaced at most once).

ALTER TABLE claims ADD COLUMN frequency TEXT NOT NULL DEFAULT 'original';
ALTER TABLE claims ADD COLUMN replaces_claim_id TEXT;
ALTER TABLE claims ADD COLUMN superseded_by TEXT;

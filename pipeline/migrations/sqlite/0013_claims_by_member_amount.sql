-- Member history reads each claim's amount with its time: with the amount in the index,
-- the history of a batch is answered from the index alone.
CREATE INDEX claims_by_member_amount ON claims (tenant_id, member_id, received_at, claim_amount);
DROP INDEX claims_by_member;

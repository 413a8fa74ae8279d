-- Member history for rules and fraud scoring: a member's recent claims.
CREATE INDEX claims_by_member ON claims (tenant_id, member_id, received_at);

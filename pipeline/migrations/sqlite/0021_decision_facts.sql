-- What each claim's automatic decision was made with besides the claim (JSON, see
-- model::DecisionFacts): a backtest or a reprocess decides the claim again on it.
ALTER TABLE claims ADD COLUMN facts TEXT;

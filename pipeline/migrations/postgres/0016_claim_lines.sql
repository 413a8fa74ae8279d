-- A claim's lines with their adjudication (contract part 2: Line-level adjudication), as
-- JSON, written with its decision; NULL until the claim is decided.

ALTER TABLE claims ADD COLUMN lines TEXT;

-- hookonce schema, version 6: a conflict may record a delivery that was
-- answered with the stored original's answer instead of being refused
-- (the sender's changed_payload: duplicate), so what differed is kept and
-- the operator can accept it once. A constant default: existing rows are
-- not rewritten.
ALTER TABLE hookonce_conflicts
    ADD COLUMN answered_duplicate boolean NOT NULL DEFAULT false;

-- v6: a conflict may record a delivery that was answered with the stored
-- original's answer instead of being refused (changed_payload: duplicate),
-- so what differed is kept and the operator can accept it once. Accept
-- finds an accepted payload of a key by (sender, key) and received_hash.
ALTER TABLE conflicts ADD COLUMN answered_duplicate INTEGER NOT NULL DEFAULT 0;

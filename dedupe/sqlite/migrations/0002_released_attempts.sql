-- v2: released records keep their attempts and the request's head
-- (method, target, headers) beside request_body. Both are JSON; NULL
-- means none.
ALTER TABLE records ADD COLUMN attempts TEXT;
ALTER TABLE records ADD COLUMN request_head TEXT;

-- Prepended (in store.go) to the scripts that append an attempt.
-- Attempts are lines of JSON in the record's 'at' field, oldest first;
-- append_attempt adds line to stored and keeps the latest keep.
local function append_attempt(rec, stored, line, keep)
  local lines = {}
  if stored and stored ~= '' then
    for l in string.gmatch(stored, '[^\n]+') do lines[#lines + 1] = l end
  end
  lines[#lines + 1] = line
  local from = math.max(1, #lines - tonumber(keep) + 1)
  redis.call('HSET', rec, 'at', table.concat(lines, '\n', from, #lines))
end

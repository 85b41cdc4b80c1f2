package ledger

import "github.com/redis/go-redis/v9"

// The meta hash of a step holds:
//
//	next      highest attempt number handed out
//	recorded  attempt records ever appended (counted finishes and lost
//	          attempts), including those trimmed by MaxHistory
//	done      request id of the attempt that succeeded: the completion marker
//	done_at   when it succeeded (unix ms)
//	fence     lease tokens handed out so far (the last one is the newest)
//	o:<n>     attempt n is open (begun, not finished): "<started ms>|<request id as JSON>"
//	f:<n>     attempt n was released (uncounted) and is handed out again next
//	l:<n>     attempt n was recorded as lost; a late Finish replaces that record
//
// Records are JSON objects that start with {"attempt":<n>, so a script can
// find an attempt's record by prefix without decoding JSON; a lost record
// continues with "lost":true, (the field order of the record struct in
// record.go is part of this contract).
//
// Scripts do every check before their first write: Redis does not roll a
// script back when it fails half-way.

// beginScript starts an attempt of one step.
//
// KEYS[1] meta hash, KEYS[2] attempts list, KEYS[3] lease, and optionally
// KEYS[4] the epoch marker (not on Cluster, where it lives in another slot).
// ARGV[1] request id as a JSON string; ARGV[2] now (unix ms); ARGV[3] TTL (ms);
// ARGV[4] max history; ARGV[5] the lost-attempt error text as a JSON string;
// ARGV[6] lease TTL (ms; "0": no lease); ARGV[7] attempt floor for a step
// without an entry ("0": none); ARGV[8] the call's idempotency key ("":
// none); with KEYS[4]: ARGV[9] when the message was published (unix ms),
// ARGV[10] its delivery count, which becomes the floor (if higher) when the
// message is older than the epoch and was delivered before: what the
// epochScript call and the caller's check did before.
// Returns {1, done request id, epoch} when the step has a completion
// marker, or {2, lease PTTL (ms), holder's attempt, epoch} when another
// attempt holds a live lease (nothing but the epoch marker is written
// either way), else {0, attempt, lost, recorded, {record, ...}, token,
// fresh, resumed, epoch}: lost counts the open attempts this call recorded
// as lost, resumed is 1 when the call took over its key's attempt,
// the records are the kept history, oldest first, those lost records
// included, token fences the attempt (0 without a lease), fresh is 1 when
// the step had no entry, and epoch is the epoch (unix ms; 0 without
// KEYS[4]).
//
// The lease key holds "<token>|<attempt>" and expires on Redis's own clock
// after the lease TTL unless Renew or a fenced Finish touches it; the meta
// field fence counts the tokens handed out.
//
// An attempt begun under an idempotency key keeps it in the meta field
// k:<attempt> ("<fresh><key>") while it is open. A call with the same key
// that finds that attempt open (its own lease included) is the same Begin
// asked again after its reply was lost: it takes the attempt over under a
// new token instead of recording it as lost, and reports fresh as the first
// call found it.
var beginScript = redis.NewScript(`
local meta, list, lease = KEYS[1], KEYS[2], KEYS[3]
local floor = tonumber(ARGV[7])
local epoch = 0
if KEYS[4] then
  redis.call('SET', KEYS[4], ARGV[2], 'NX')
  epoch = tonumber(redis.call('GET', KEYS[4]))
  local delivered = tonumber(ARGV[10])
  if delivered > 1 and tonumber(ARGV[9]) < epoch and delivered > floor then
    floor = delivered
  end
end
local fields = redis.call('HGETALL', meta)
local nextn, recorded, fence, done = 0, 0, 0, nil
-- open, free and keyed are made only for a step that has such fields.
local open, isOpen, free, keyed
for i = 1, #fields, 2 do
  local f, v = fields[i], fields[i + 1]
  if f == 'next' then
    nextn = tonumber(v)
  elseif f == 'recorded' then
    recorded = tonumber(v)
  elseif f == 'fence' then
    fence = tonumber(v)
  elseif f == 'done' then
    done = v
  else
    local kind, num = string.match(f, '^(%a):(%d+)$')
    if kind == 'o' then
      open, isOpen = open or {}, isOpen or {}
      open[#open + 1] = {tonumber(num), v}
      isOpen[tonumber(num)] = true
    elseif kind == 'f' then
      free = free or {}
      free[#free + 1] = tonumber(num)
    elseif kind == 'k' then
      keyed = keyed or {}
      keyed[tonumber(num)] = v
    end
  end
end
if done then
  return {1, done, epoch}
end
local key = ARGV[8]
local leaseTTL = tonumber(ARGV[6])
if leaseTTL > 0 then
  local holder = redis.call('GET', lease)
  if holder then
    local n = tonumber(string.match(holder, '|(%d+)$') or '0')
    local k = keyed and keyed[n]
    if not (key ~= '' and k and string.sub(k, 2) == key and isOpen and isOpen[n]) then
      return {2, redis.call('PTTL', lease), n, epoch}
    end
  end
end
local fresh = 0
if #fields == 0 then
  fresh = 1
end
local mine
local lost = 0
if open then
  local now = tonumber(ARGV[2])
  if #open > 1 then
    table.sort(open, function(a, b) return a[1] < b[1] end)
  end
  for _, o in ipairs(open) do
    local n, v = o[1], o[2]
    local k = keyed and keyed[n]
    if key ~= '' and k and string.sub(k, 2) == key then
      mine, fresh = n, tonumber(string.sub(k, 1, 1))
    else
      local sep = string.find(v, '|', 1, true)
      local started = string.sub(v, 1, sep - 1)
      local dur = now - tonumber(started)
      if dur < 0 then
        dur = 0
      end
      redis.call('RPUSH', list, '{"attempt":' .. n .. ',"lost":true,"class":"retryable","error":' .. ARGV[5] ..
        ',"duration_ms":' .. dur .. ',"at_ms":' .. started .. ',"request_id":' .. string.sub(v, sep + 1) .. '}')
      redis.call('HDEL', meta, 'o:' .. n, 'k:' .. n)
      redis.call('HSET', meta, 'l:' .. n, '1')
      recorded = recorded + 1
      lost = lost + 1
    end
  end
end
if fresh == 1 and floor > 1 and not mine then
  nextn = floor - 1
end
local n
if mine then
  n = mine
elseif free then
  table.sort(free)
  n = free[1]
  redis.call('HDEL', meta, 'f:' .. n)
else
  nextn = nextn + 1
  n = nextn
end
-- Lua turns a number into text with sprintf: each is turned once, and
-- not at all where the text is at hand.
local ns = tostring(n)
local nexts = ns
if nextn ~= n then
  nexts = tostring(nextn)
end
local recs = '0'
if recorded ~= 0 then
  recs = tostring(recorded)
end
local opened = ARGV[2] .. '|' .. ARGV[1]
local token = 0
if leaseTTL > 0 then
  token = fence + 1
  local ts = tostring(token)
  redis.call('SET', lease, ts .. '|' .. ns, 'PX', ARGV[6])
  if key ~= '' then
    redis.call('HSET', meta, 'next', nexts, 'recorded', recs, 'o:' .. ns, opened, 'fence', ts, 'k:' .. ns, (fresh == 1 and '1' or '0') .. key)
  else
    redis.call('HSET', meta, 'next', nexts, 'recorded', recs, 'o:' .. ns, opened, 'fence', ts)
  end
elseif key ~= '' then
  redis.call('HSET', meta, 'next', nexts, 'recorded', recs, 'o:' .. ns, opened, 'k:' .. ns, (fresh == 1 and '1' or '0') .. key)
else
  redis.call('HSET', meta, 'next', nexts, 'recorded', recs, 'o:' .. ns, opened)
end
-- recorded counts every record the list was given (trimmed ones too), so
-- a step with none has no list to read: a first attempt's Begin skips it.
local history = {}
if recorded > 0 then
  history = redis.call('LRANGE', list, 0, -1)
end
local maxh = tonumber(ARGV[4])
if maxh > 0 and #history > maxh then
  redis.call('LTRIM', list, -maxh, -1)
  local kept = {}
  for i = #history - maxh + 1, #history do
    kept[#kept + 1] = history[i]
  end
  history = kept
end
redis.call('PEXPIRE', meta, ARGV[3])
if #history > 0 then
  redis.call('PEXPIRE', list, ARGV[3])
end
local resumed = 0
if mine then
  resumed = 1
end
return {0, n, lost, recorded, history, token, fresh, resumed, epoch}
`)

// renewScript extends a lease its holder still holds.
//
// KEYS[1] lease. ARGV[1] the lease value Begin set ("<token>|<attempt>");
// ARGV[2] lease TTL (ms).
// Returns 1 when the lease was ours and is extended, 0 when it expired or
// another attempt holds it (nothing is written then).
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// epochScript returns when the ledger's data set began, creating the marker
// on first use (and again after Redis lost everything).
//
// KEYS[1] epoch. ARGV[1] now (unix ms).
// Returns the epoch (unix ms).
var epochScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return tonumber(redis.call('GET', KEYS[1]))
`)

// finishScript records how an attempt ended.
//
// KEYS[1] meta hash, KEYS[2] attempts list, KEYS[3] lease.
// ARGV[1] attempt number; ARGV[2] "1" if the attempt counts; ARGV[3] "1" if
// it succeeded; ARGV[4] the attempt record (JSON starting {"attempt":<n>,);
// ARGV[5] request id (raw, for the completion marker); ARGV[6] now (unix ms);
// ARGV[7] TTL (ms); ARGV[8] max history; ARGV[9] the lease value the attempt
// holds ("<token>|<attempt>"), or "" for an unfenced finish.
// Returns what happened to the record:
//
//	stale       fenced, and the lease is no longer the caller's (it expired,
//	            or another attempt holds it): nothing is written
//	recorded    appended (the attempt was open, or unknown to the ledger)
//	replaced    a late finish replaced the record of an attempt declared lost
//	duplicate   a record of this attempt exists already; nothing appended
//	released    uncounted: the number is handed out again
//	unrecorded  uncounted, but the attempt was declared lost and its record
//	            is already trimmed, so it stays counted
//	ignored     uncounted, and the attempt was not open
var finishScript = redis.NewScript(`
local meta, list, lease = KEYS[1], KEYS[2], KEYS[3]
if ARGV[9] ~= '' then
  if redis.call('GET', lease) ~= ARGV[9] then
    return 'stale'
  end
  redis.call('DEL', lease)
end
local n, ns = tonumber(ARGV[1]), ARGV[1]
local status
-- An attempt's k: field lives only while its o: field does (Begin sets and
-- removes them together), so the HDEL's count says whether it was open.
local wasOpen = redis.call('HDEL', meta, 'o:' .. ns, 'k:' .. ns) > 0
-- length is the list's length once an RPUSH told it.
local length
if ARGV[2] == '1' and wasOpen then
  -- The common case first: the helpers below are made only when needed.
  length = redis.call('RPUSH', list, ARGV[4])
  redis.call('HINCRBY', meta, 'recorded', '1')
  status = 'recorded'
else
  local function find(prefix)
    local recs = redis.call('LRANGE', list, 0, -1)
    for i = #recs, 1, -1 do
      if string.sub(recs[i], 1, #prefix) == prefix then
        return i - 1, recs[i]
      end
    end
    return nil, nil
  end
  local function release(num)
    local nextn = tonumber(redis.call('HGET', meta, 'next') or '0')
    if num == nextn then
      nextn = nextn - 1
      while nextn > 0 and redis.call('HDEL', meta, 'f:' .. nextn) == 1 do
        nextn = nextn - 1
      end
      redis.call('HSET', meta, 'next', nextn)
    else
      redis.call('HSET', meta, 'f:' .. num, '1')
    end
  end
  local lostPrefix = '{"attempt":' .. ns .. ',"lost":true,'
  if ARGV[2] == '1' then
    if redis.call('HDEL', meta, 'l:' .. ns) == 1 then
      local i = find(lostPrefix)
      if i then
        redis.call('LSET', list, i, ARGV[4])
      end
      status = 'replaced'
    elseif find('{"attempt":' .. ns .. ',') then
      status = 'duplicate'
    else
      length = redis.call('RPUSH', list, ARGV[4])
      redis.call('HINCRBY', meta, 'recorded', '1')
      redis.call('HDEL', meta, 'f:' .. ns)
      if n > tonumber(redis.call('HGET', meta, 'next') or '0') then
        redis.call('HSET', meta, 'next', ns)
      end
      status = 'recorded'
    end
  elseif wasOpen then
    release(n)
    status = 'released'
  elseif redis.call('HDEL', meta, 'l:' .. ns) == 1 then
    local i, rec = find(lostPrefix)
    if i then
      redis.call('LREM', list, 1, rec)
      redis.call('HINCRBY', meta, 'recorded', '-1')
      release(n)
      status = 'released'
    else
      status = 'unrecorded'
    end
  else
    status = 'ignored'
  end
end
if ARGV[3] == '1' then
  redis.call('HSET', meta, 'done', ARGV[5], 'done_at', ARGV[6])
end
local maxh = tonumber(ARGV[8])
if length == nil or (maxh > 0 and length > maxh) then
  redis.call('LTRIM', list, -maxh, -1)
end
redis.call('PEXPIRE', meta, ARGV[7])
redis.call('PEXPIRE', list, ARGV[7])
return status
`)

// historyScript reads one step's ledger without changing it.
//
// KEYS[1] meta hash, KEYS[2] attempts list (KEYS[3], the lease, unused).
// No ARGV.
// Returns {recorded, open, done (1 or 0), done request id or "", done_at
// (unix ms, 0 if not done), PTTL of the meta hash in ms (-2 when absent),
// {record, ...}} with records oldest first.
var historyScript = redis.NewScript(`
local meta, list = KEYS[1], KEYS[2]
local fields = redis.call('HGETALL', meta)
local recorded, open, done, doneID, doneAt = 0, 0, 0, '', 0
for i = 1, #fields, 2 do
  local f, v = fields[i], fields[i + 1]
  if f == 'recorded' then
    recorded = tonumber(v)
  elseif f == 'done' then
    done, doneID = 1, v
  elseif f == 'done_at' then
    doneAt = tonumber(v)
  elseif string.sub(f, 1, 2) == 'o:' then
    open = open + 1
  end
end
return {recorded, open, done, doneID, doneAt, redis.call('PTTL', meta), redis.call('LRANGE', list, 0, -1)}
`)

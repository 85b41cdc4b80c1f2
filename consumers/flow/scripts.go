package flow

import "github.com/redis/go-redis/v9"

// Every script reads Redis's clock (TIME), so replicas with skewed clocks
// share one; times are µs (limiters) or ms (circuits) since the epoch, and
// returned waits are relative to that clock. Scripts do every check
// before their first write.

// acquireScript admits up to n requests against a limiter.
//
// KEYS[1] requests TAT, KEYS[2] tokens TAT, KEYS[3] cool-down end.
// ARGV[1] n wanted; ARGV[2] µs per request ("0": no request limit);
// ARGV[3] request burst; ARGV[4] µs per token ("0": no token limit);
// ARGV[5] tokens reserved per request; ARGV[6] token burst.
// Returns {granted, wait µs, cooling}: granted ≥ 1 with its reservations
// made, or 0 with how long until one request fits (cooling 1: the limiter
// is cooling down after a provider's 429 and wait is what is left of it).
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cool = tonumber(redis.call('GET', KEYS[3]) or '0')
if cool > now then
  return {0, math.ceil(cool - now), 1}
end
local n = tonumber(ARGV[1])
local wait = 0
local function room(key, per, cost, burst)
  local tat = math.max(tonumber(redis.call('GET', key) or '0'), now)
  local free = math.floor((now + burst * per - tat) / (cost * per) + 1e-9)
  if free < 1 then
    wait = math.max(wait, tat + cost * per - (now + burst * per))
  end
  n = math.min(n, free)
  return tat
end
local rper, tper = tonumber(ARGV[2]), tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local rtat, ttat
if rper > 0 then rtat = room(KEYS[1], rper, 1, tonumber(ARGV[3])) end
if tper > 0 then ttat = room(KEYS[2], tper, cost, tonumber(ARGV[6])) end
if n < 1 then
  return {0, math.max(math.ceil(wait), 1), 0}
end
if rper > 0 then
  local v = rtat + n * rper
  redis.call('SET', KEYS[1], string.format('%.0f', v), 'PX', math.ceil((v - now) / 1000) + 1000)
end
if tper > 0 then
  local v = ttat + n * cost * tper
  redis.call('SET', KEYS[2], string.format('%.0f', v), 'PX', math.ceil((v - now) / 1000) + 1000)
end
return {n, 0, 0}
`)

// adjustScript moves a limiter's reservations: negative deltas give back
// what was reserved and not used (never below now), positive ones add
// usage beyond the estimate.
//
// KEYS[1] requests TAT, KEYS[2] tokens TAT.
// ARGV[1] µs to add to the requests TAT; ARGV[2] µs to add to the tokens TAT.
// Returns 1.
var adjustScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for i = 1, 2 do
  local d = tonumber(ARGV[i])
  if d ~= 0 then
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    local v
    if d < 0 then
      v = math.max(tat + d, now)
    else
      v = math.max(tat, now) + d
    end
    if v > now then
      redis.call('SET', KEYS[i], string.format('%.0f', v), 'PX', math.ceil((v - now) / 1000) + 1000)
    else
      redis.call('DEL', KEYS[i])
    end
  end
end
return 1
`)

// coolScript starts or extends a limiter's cool-down (never shortens it).
//
// KEYS[1] cool-down end. ARGV[1] cool-down µs.
// Returns {started, remaining µs}: started is 1 when no cool-down was
// running (this call began one), remaining is what is left of the
// cool-down now in force.
var coolScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local v = now + tonumber(ARGV[1])
local started = 0
if cur <= now then started = 1 end
if v > cur then
  redis.call('SET', KEYS[1], string.format('%.0f', v), 'PX', math.ceil((v - now) / 1000) + 1)
else
  v = cur
end
return {started, math.ceil(v - now)}
`)

// peekScript reads what is left of a limiter's cool-down.
//
// KEYS[1] cool-down end. Returns remaining µs (0: not cooling).
var peekScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur <= now then return 0 end
return math.ceil(cur - now)
`)

// A circuit hash holds:
//
//	state        open | half (half-open); the key is absent when closed
//	until        when the open state's cool-down ends (ms)
//	failures     failures in the window that opened it, plus failed probes
//	prober       replica holding the half-open probe
//	probe_until  when the prober's claim lapses and another may probe (ms)
//
// It expires (ARGV key TTL) so a circuit nobody tends closes by itself.

// openScript opens a closed circuit.
//
// KEYS[1] circuit. ARGV[1] cool-down ms; ARGV[2] failures; ARGV[3] key TTL ms.
// Returns {opened, state, remaining ms of the cool-down, failures}: opened
// is 0 when the circuit was already open or half-open (nothing written).
var openScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = redis.call('HGET', KEYS[1], 'state')
if st then
  local u = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
  return {0, st, math.max(u - now, 0), tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')}
end
local u = now + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'open', 'until', u, 'failures', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, 'open', tonumber(ARGV[1]), tonumber(ARGV[2])}
`)

// probeScript asks for the half-open probe: an open circuit whose
// cool-down is over turns half-open with the caller as its prober; a
// half-open circuit is granted to its prober again, or to anyone once the
// prober's claim lapsed.
//
// KEYS[1] circuit. ARGV[1] replica id; ARGV[2] probe claim ms; ARGV[3] key TTL ms.
// Returns {state, remaining ms of the cool-down, failures, granted}; state
// is "closed" when the key is absent.
var probeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'closed', 0, 0, 0} end
local u = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
local f = tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
if st == 'open' and now < u then return {'open', u - now, f, 0} end
if st == 'half' then
  local p = redis.call('HGET', KEYS[1], 'prober')
  local pu = tonumber(redis.call('HGET', KEYS[1], 'probe_until') or '0')
  if p ~= ARGV[1] and now < pu then return {'half', 0, f, 0} end
end
redis.call('HSET', KEYS[1], 'state', 'half', 'prober', ARGV[1], 'probe_until', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'half', 0, f, 1}
`)

// closeScript closes a half-open circuit after its probe succeeded.
//
// KEYS[1] circuit. ARGV[1] replica id (the prober).
// Returns 1 when closed, 0 when the caller was not its prober.
var closeScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') == 'half' and redis.call('HGET', KEYS[1], 'prober') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// reopenScript opens a half-open circuit again after its probe failed.
//
// KEYS[1] circuit. ARGV[1] replica id (the prober); ARGV[2] cool-down ms;
// ARGV[3] key TTL ms.
// Returns {reopened, remaining ms of the cool-down, failures}.
var reopenScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], 'state') ~= 'half' or redis.call('HGET', KEYS[1], 'prober') ~= ARGV[1] then
  return {0, 0, 0}
end
local u = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'state', 'open', 'until', u)
redis.call('HDEL', KEYS[1], 'prober', 'probe_until')
local f = redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, tonumber(ARGV[2]), f}
`)

// statusScript reads a circuit.
//
// KEYS[1] circuit. Returns {state, remaining ms of the cool-down,
// failures, prober, remaining ms of the prober's claim}; state "closed"
// when the key is absent.
var statusScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'closed', 0, 0, '', 0} end
local u = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
local pu = tonumber(redis.call('HGET', KEYS[1], 'probe_until') or '0')
return {st, math.max(u - now, 0), tonumber(redis.call('HGET', KEYS[1], 'failures') or '0'),
  redis.call('HGET', KEYS[1], 'prober') or '', math.max(pu - now, 0)}
`)

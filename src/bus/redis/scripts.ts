// Lua run atomically inside Redis. Every script gets the prefix `p` of its key group (GROUP below)
// as ARGV[1] and derives the key names it needs from it; KEYS[1] is only a key of that group's
// slot, so a Redis Cluster routes the script to the shard holding it. On one Redis every group's
// prefix is the same (`pb:`); on a cluster each group is one hash tag, `pb:{o}` and `pb:{s}`
// (docs/decisions/0151-redis-key-and-channel-layout.md). A script touches one group only.
//
// Keys under prefix p:
//   nonce:<n>            string deviceId, PX ttl
//   rl:<key>             fixed-window counter, PX window (or a flag `1` set by RedisBus.mark, PX ttl)
//   sess:<id>            hash rec (JSON), dev, tok, evseq, seen (ms of the last use a touch reported); PX idle
//   sx:d:<deviceId>      zset sessionId -> expiry ms (index for deleteWhere), PX >= its members
//   sx:t:<tokenId>       same, by token
//   ev:<sessionId>       list of "seq\nstreamId\ndata" (replay buffer); evm:<sessionId> hash bytes
//   dev:<deviceId>       hash node, epoch (epoch survives release so it stays monotonic), v; 30 days
//   owned:<nodeId>       set of devices claimed by the node (to reap them when it dies)
//   nodes                zset nodeId -> liveness deadline (Redis server clock, ms)
//   boots                hash nodeId -> boot id of the process announcing it (`<boot>.v<N>`)
// Each message and record has a format version, numbered and read in ../formats.ts
// (docs/decisions/0200-bus-and-record-format-versions.md); `v` below is FORMATS.owner.write.
// Channels: ch:control, ch:node:<nodeId> ("m"+msg | "s<epoch> <deviceId>"), ch:dev:<deviceId>.
// On a cluster (connector.ts): node and device channels are sharded, ch:node:{<nodeId>} and
// ch:dev:{<deviceId>}; the claim scripts' supersede notices go to the plain channel
// <own>ch:node:<nodeId> (a script may only SPUBLISH to its own slot). Control events are
// published by the `control` script, from the same shard.

import { FORMATS } from '../formats.ts';

const OWNER_V = FORMATS.owner.write;

const NOW = `local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

const ALIVE = `${NOW}
local function alive(p, n)
  local s = redis.call('ZSCORE', p .. 'nodes', n)
  return s and tonumber(s) >= now()
end
`;

/** Releases every device a node holds and forgets the node. */
const REAP = `local function reap(p, n)
  local owned = p .. 'owned:' .. n
  for _, d in ipairs(redis.call('SMEMBERS', owned)) do
    local k = p .. 'dev:' .. d
    if redis.call('HGET', k, 'node') == n then redis.call('HDEL', k, 'node') end
  end
  redis.call('DEL', owned)
  redis.call('ZREM', p .. 'nodes', n)
  redis.call('HDEL', p .. 'boots', n)
  redis.call('HDEL', p .. 'beats', n)
end
`;

/** Adds a session to an index; the index lives at least as long as its newest member. */
const INDEX = `${NOW}
local function index(k, sid, idle)
  local t = now()
  redis.call('ZADD', k, t + idle, sid)
  redis.call('ZREMRANGEBYSCORE', k, '-inf', t)
  if redis.call('PTTL', k) < idle then redis.call('PEXPIRE', k, idle) end
end
`;

const DROP = `local function drop(p, sid)
  local key = p .. 'sess:' .. sid
  local f = redis.call('HMGET', key, 'dev', 'tok')
  if not f[1] then return 0 end
  redis.call('DEL', key, p .. 'ev:' .. sid, p .. 'evm:' .. sid)
  redis.call('ZREM', p .. 'sx:d:' .. f[1], sid)
  redis.call('ZREM', p .. 'sx:t:' .. f[2], sid)
  return 1
end
`;

// Claims a device for ARGV[2]; tells a different previous owner it was superseded.
const CLAIM_BODY = `
  local prev = redis.call('HGET', k, 'node')
  local e = redis.call('HINCRBY', k, 'epoch', 1)
  redis.call('HSET', k, 'node', self, 'v', ${OWNER_V})
  redis.call('PEXPIRE', k, 2592000000) -- 30 days: forgets devices gone for good
  redis.call('SADD', p .. 'owned:' .. self, d)
  if prev and prev ~= self then
    redis.call('SREM', p .. 'owned:' .. prev, d)
    redis.call('PUBLISH', p .. 'ch:node:' .. prev, 's' .. e .. ' ' .. d)
  end
  return e
`;

export const lua = {
  // ARGV: p, key, windowMs. Opens the window on the first hit only.
  hit: `local k = ARGV[1] .. 'rl:' .. ARGV[2]
local n = redis.call('INCR', k)
if redis.call('PTTL', k) < 0 then redis.call('PEXPIRE', k, ARGV[3]) end
return n`,

  // ARGV: p, key. DECR keeps the key's expiry; a lapsed window stays lapsed.
  unhit: `local k = ARGV[1] .. 'rl:' .. ARGV[2]
if tonumber(redis.call('GET', k) or '0') > 0 then redis.call('DECR', k) end
return 0`,

  // ARGV: p, sid, rec, dev, tok, idleMs, maxPerToken (0: no cap). Returns the evicted session ids:
  // the token's least recently used (lowest expiry in sx:t) beyond maxPerToken.
  sessionCreate: `${INDEX}${DROP}
local p, sid, idle = ARGV[1], ARGV[2], tonumber(ARGV[6])
local key = p .. 'sess:' .. sid
redis.call('HSET', key, 'rec', ARGV[3], 'dev', ARGV[4], 'tok', ARGV[5])
redis.call('PEXPIRE', key, idle)
index(p .. 'sx:d:' .. ARGV[4], sid, idle)
local tk = p .. 'sx:t:' .. ARGV[5]
index(tk, sid, idle)
local out, max = {}, tonumber(ARGV[7]) or 0
if max > 0 then
  local excess = redis.call('ZCARD', tk) - max
  -- One more than the excess: sessions created in the same millisecond tie on their expiry and
  -- sort by id, so the new session can be among the lowest; it is never the one evicted.
  if excess > 0 then
    for _, old in ipairs(redis.call('ZRANGE', tk, 0, excess)) do
      if excess > 0 and old ~= sid then
        drop(p, old)
        redis.call('ZREM', tk, old)
        table.insert(out, old)
        excess = excess - 1
      end
    end
  end
end
return out`,

  // ARGV: p, sid, idleMs, seen (ms of the use it reports). Returns the record JSON or nil.
  sessionTouch: `${INDEX}
local p, sid, idle = ARGV[1], ARGV[2], tonumber(ARGV[3])
local key = p .. 'sess:' .. sid
local f = redis.call('HMGET', key, 'rec', 'dev', 'tok')
if not f[1] then return false end
redis.call('PEXPIRE', key, idle)
redis.call('HSET', key, 'seen', ARGV[4])
index(p .. 'sx:d:' .. f[2], sid, idle)
index(p .. 'sx:t:' .. f[3], sid, idle)
return f[1]`,

  // ARGV: p, deviceId. Live sessions bound to the device (the index's scores are expiries).
  sessionCount: `${NOW}
return redis.call('ZCOUNT', ARGV[1] .. 'sx:d:' .. ARGV[2], '(' .. now(), '+inf')`,

  // ARGV: p, deviceId, limit. Live sessions bound to the device, most recently used first (the
  // index's scores are expiries, renewed on each touch): pairs of record JSON and the last use a
  // touch reported ('' if none since creation).
  sessionList: `${NOW}
local p, t, out = ARGV[1], now(), {}
local ids = redis.call('ZREVRANGEBYSCORE', p .. 'sx:d:' .. ARGV[2], '+inf', '(' .. t, 'LIMIT', 0, tonumber(ARGV[3]))
for _, sid in ipairs(ids) do
  local f = redis.call('HMGET', p .. 'sess:' .. sid, 'rec', 'seen')
  if f[1] then
    table.insert(out, f[1])
    table.insert(out, f[2] or '')
  end
end
return out`,

  // ARGV: p, sid
  sessionDelete: `${DROP}
return drop(ARGV[1], ARGV[2])`,

  // ARGV: p, deviceId or '', tokenId or ''. Sessions matching either.
  sessionDeleteWhere: `${DROP}
local p, n = ARGV[1], 0
for i, kind in ipairs({'d', 't'}) do
  local id = ARGV[i + 1]
  if id ~= '' then
    local k = p .. 'sx:' .. kind .. ':' .. id
    for _, sid in ipairs(redis.call('ZRANGE', k, 0, -1)) do n = n + drop(p, sid) end
    redis.call('DEL', k)
  end
end
return n`,

  // ARGV: p, self, deviceId
  claim: `local p, self, d = ARGV[1], ARGV[2], ARGV[3]
local k = p .. 'dev:' .. d
${CLAIM_BODY}`,

  // ARGV: p, self, deviceId, epoch. Keep, restore (the record lost this claim), claim anew (absent
  // or dead owner), or nil (someone else's, or a newer socket here).
  // Epochs only grow, so a record whose epoch is below the one this node holds predates this
  // node's claim: Redis lost the claim (a failover to a replica that missed it, a restart without
  // persistence). The claim is written back as it was, superseding whoever the record names, so
  // the epoch a node serves with never goes backwards (docs/decisions/0152-failover-and-epochs.md).
  reclaim: `${ALIVE}
local p, self, d, held = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local k = p .. 'dev:' .. d
local f = redis.call('HMGET', k, 'node', 'epoch')
local stored = tonumber(f[2]) or 0
if f[1] == self and stored == held then
  redis.call('SADD', p .. 'owned:' .. self, d)
  return held
end
if stored < held then
  redis.call('HSET', k, 'node', self, 'epoch', held, 'v', ${OWNER_V})
  redis.call('PEXPIRE', k, 2592000000)
  redis.call('SADD', p .. 'owned:' .. self, d)
  if f[1] and f[1] ~= self then
    redis.call('SREM', p .. 'owned:' .. f[1], d)
    redis.call('PUBLISH', p .. 'ch:node:' .. f[1], 's' .. held .. ' ' .. d)
  end
  return held
end
if f[1] == self or (f[1] and alive(p, f[1])) then return false end
${CLAIM_BODY}`,

  // ARGV: p, self, deviceId, epoch. Compare-and-delete.
  release: `local p, self, d = ARGV[1], ARGV[2], ARGV[3]
local k = p .. 'dev:' .. d
local f = redis.call('HMGET', k, 'node', 'epoch')
if f[1] ~= self or tonumber(f[2]) ~= tonumber(ARGV[4]) then return 0 end
redis.call('HDEL', k, 'node')
redis.call('SREM', p .. 'owned:' .. self, d)
return 1`,

  // ARGV: p, deviceId. {node, epoch, v} if owned by a live node (v nil: an older release's record).
  owner: `${ALIVE}
local f = redis.call('HMGET', ARGV[1] .. 'dev:' .. ARGV[2], 'node', 'epoch', 'v')
if f[1] and alive(ARGV[1], f[1]) then return {f[1], f[2], f[3]} end
return false`,

  // ARGV: p, self, boot, ttlMs, reap (0: reap no peer — this node could not watch them lately;
  // absent, as an older release sends it: reap), watchGapMs (reap no peer either when this
  // node's previous renewal is older than that, by Redis' clock: a heartbeat held up by an
  // outage runs after its peers lapsed in the same outage; absent: no such check).
  // Renews this node, reaps dead ones.
  // Returns {wasAlive, previousBoot, node1, boot1, node2, boot2, ...} (alive nodes after renewal).
  heartbeat: `${NOW}${REAP}
local p, self, boot = ARGV[1], ARGV[2], ARGV[3]
local nodes, boots, t = p .. 'nodes', p .. 'boots', now()
local prevScore = redis.call('ZSCORE', nodes, self)
local prevBoot = redis.call('HGET', boots, self) or ''
local wasAlive = (prevScore and tonumber(prevScore) >= t) and 1 or 0
local watched = true
if ARGV[6] then
  local prevBeat = tonumber(redis.call('HGET', p .. 'beats', self) or '0')
  watched = t - prevBeat <= tonumber(ARGV[6])
end
-- A new process under this id holds none of its predecessor's sockets.
if prevBoot ~= boot then reap(p, self) end
-- Dead peers lose their devices. A lapsed self keeps its own: reclaimDevice then keeps the epochs.
if ARGV[5] ~= '0' and watched then
  for _, n in ipairs(redis.call('ZRANGEBYSCORE', nodes, '-inf', '(' .. t)) do
    if n ~= self then reap(p, n) end
  end
end
redis.call('ZADD', nodes, t + tonumber(ARGV[4]), self)
redis.call('HSET', boots, self, boot)
redis.call('HSET', p .. 'beats', self, t)
local out = {wasAlive, prevBoot}
for _, n in ipairs(redis.call('ZRANGEBYSCORE', nodes, t, '+inf')) do
  out[#out + 1] = n
  out[#out + 1] = redis.call('HGET', boots, n) or ''
end
return out`,

  // ARGV: p, channel, message. Control events leave from the ownership group's shard, one fixed
  // server, so a node's events reach every subscriber in the order it sent them: a plain PUBLISH
  // on a cluster goes to any node, and two nodes' hops over the cluster bus can cross.
  control: `return redis.call('PUBLISH', ARGV[2], ARGV[3])`,

  // ARGV: p, self
  leave: `${REAP}
reap(ARGV[1], ARGV[2])
return 1`,

  // ARGV: p, self, since (when this node first renewed itself; '' on the first call: read it).
  // Returns {since, peers}: peers = the live peers whose last renewal came no later than
  // `since` (one that never recorded a renewal time, an older release, counts as unheard).
  // RedisBus.untilPeersHeard.
  unheard: `${NOW}
local nodes, beats, self = ARGV[1] .. 'nodes', ARGV[1] .. 'beats', ARGV[2]
local since = tonumber(ARGV[3]) or tonumber(redis.call('HGET', beats, self) or '0')
local n = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', nodes, now(), '+inf')) do
  if m ~= self and (tonumber(redis.call('HGET', beats, m) or '0') <= since) then n = n + 1 end
end
return {tostring(since), n}`,

  // ARGV: p
  alive: `${NOW}
return redis.call('ZRANGEBYSCORE', ARGV[1] .. 'nodes', now(), '+inf')`,

  // ARGV: p, sid, streamId, data, maxEvents, maxBytes, ttlMs. Returns seq, or nil (nothing
  // kept) when the session is gone: nothing could resume the stream, and a count begun anew
  // would give ids the session already used. seq lives on the session hash so ids never
  // repeat within a session even if the buffer expires.
  append: `local p, sid = ARGV[1], ARGV[2]
local list, meta, sess = p .. 'ev:' .. sid, p .. 'evm:' .. sid, p .. 'sess:' .. sid
if redis.call('EXISTS', sess) == 0 then return false end
local seq = redis.call('HINCRBY', sess, 'evseq', 1)
local entry = seq .. '\\n' .. ARGV[3] .. '\\n' .. ARGV[4]
redis.call('RPUSH', list, entry)
local bytes = redis.call('HINCRBY', meta, 'bytes', #entry)
local n = redis.call('LLEN', list)
while n > 1 and (n > tonumber(ARGV[5]) or bytes > tonumber(ARGV[6])) do
  bytes = redis.call('HINCRBY', meta, 'bytes', -#redis.call('LPOP', list))
  n = n - 1
end
local ttl = tonumber(ARGV[7])
local s = redis.call('PTTL', sess)
if s > 0 and s < ttl then ttl = s end
redis.call('PEXPIRE', list, ttl)
redis.call('PEXPIRE', meta, ttl)
return seq`,
} as const;

export type ScriptName = keyof typeof lua;

/** The key group each script touches (its ARGV[1] is that group's prefix: connector.ts, KeyLayout). */
export const GROUP: Record<ScriptName, 'own' | 'sess' | 'single'> = {
  hit: 'single',
  unhit: 'single',
  sessionCreate: 'sess',
  sessionTouch: 'sess',
  sessionCount: 'sess',
  sessionList: 'sess',
  sessionDelete: 'sess',
  sessionDeleteWhere: 'sess',
  append: 'sess',
  claim: 'own',
  reclaim: 'own',
  release: 'own',
  owner: 'own',
  heartbeat: 'own',
  leave: 'own',
  control: 'own',
  alive: 'own',
  unheard: 'own',
};

"""Group assembly: scored members of one task (and policy-version window) become one `RolloutGroup`, once.

Every state change is a Lua script, so concurrent workers and a redelivered task never see half a change:
- `add`: a member joins its bucket (a member key makes a second delivery a no-op); the G-th member renames
  the bucket to a claim named by the group id (sha1 of the sorted member ids, so re-feeding the same input
  names the same group).
- `emit`: writes the claimed group to `slca:groups` only if it was not emitted before, and only when the
  stream has room (back-pressure: a full stream leaves the claim in place; nothing is dropped). Room is what the
  live readers still owe (`workers/backlog.py`: a leftover consumer group does not count).
- `seal`: a bucket older than the timeout becomes a partial claim (≥ 2 members) or, with one member, a dead
  letter; later members of a partial group are recognised as late and dead-lettered, not silently dropped.
The group is built in Python, as the `RolloutGroup` contract, between `add`/`seal` and `emit_many`; if that
process dies, the claim stays and the assembler's sweep emits it (`emit_stale`).

Trimming `slca:trajectories`: `add` remembers each member's stream entry id (`Keys.entry`); the script that
writes its group (`emit`), or dead-letters a lone member (`seal`), XDELs those entries in the same step, so an
entry leaves the stream exactly when its trajectory is safely elsewhere. Why XDEL by id, not XTRIM MINID:
groups complete out of stream order (a slow task, a partial group waiting for its timeout), so no id splits
"grouped" from "waiting". A second stream entry of a trajectory already held is deleted at once (`add`).
Late and unprocessable members are deleted by the dead-letter script, with their dead letter.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis

from slca.contracts import Reward, RolloutGroup, Trajectory, dump_msgpack, load_msgpack
from slca.contracts.queues import DEAD_MAXLEN
from slca.contracts.stats import RewardStats
from workers.backlog import live_groups
from workers.keys import Keys
from workers.luascripts import LuaScript, ScriptBatch

_ADD = """
local member, bucket, buckets, sealed = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local claims, reward_key, stats = KEYS[5], KEYS[6], KEYS[7]
local entry_key, trajectories = KEYS[8], KEYS[9]
local tid, traj, reward, G = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now, ttl, claim_prefix = ARGV[5], ARGV[6], ARGV[7]
local eid = ARGV[10]
local held = redis.call('GET', member)
if held then
  -- the trajectory is held already (bucket, claim, group): another entry of it is redundant. Not for a late one:
  -- its dead letter (which deletes the entry) may not be written yet.
  if eid ~= '' and held ~= 'late' and redis.call('GET', entry_key) ~= eid then
    redis.call('XDEL', trajectories, eid)
  end
  return {'duplicate', '', '0'}
end
-- the stored reward (trajectory id + scorer version) wins over a re-computed one
local fresh = '1'
if not redis.call('SET', reward_key, reward, 'NX', 'EX', ttl) then
  reward = redis.call('GET', reward_key)
  fresh = '0'
elseif ARGV[8] ~= '' then
  -- ARGV[8]: the entry's fields, flat (name, value, ...), as `RewardStats.to_fields` wrote them
  redis.call('XADD', stats, 'MAXLEN', '~', ARGV[9], '*', unpack(cjson.decode(ARGV[8])))
end
local remaining = tonumber(redis.call('GET', sealed) or '0')
if remaining > 0 then
  redis.call('DECR', sealed)
  redis.call('SET', member, 'late', 'EX', ttl)
  return {'late', '', fresh}
end
redis.call('SET', member, bucket, 'EX', ttl)
if eid ~= '' then redis.call('SET', entry_key, eid, 'EX', ttl) end
redis.call('HSET', bucket, 't:' .. tid, traj, 'r:' .. tid, reward)
redis.call('ZADD', buckets, 'NX', now, bucket)
if redis.call('HLEN', bucket) < 2 * G then return {'pending', '', fresh} end
local fields = redis.call('HKEYS', bucket)
local ids = {}
for _, f in ipairs(fields) do if string.sub(f, 1, 2) == 't:' then table.insert(ids, string.sub(f, 3)) end end
table.sort(ids)
local gid = redis.sha1hex(table.concat(ids, ','))
redis.call('RENAME', bucket, claim_prefix .. gid)
redis.call('HSET', claim_prefix .. gid, 'partial', '0')
redis.call('ZREM', buckets, bucket)
redis.call('ZADD', claims, now, gid)
return {'complete', gid, fresh}
"""

_SEAL = """
local bucket, buckets, sealed, claims, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local G, now, late_ttl, claim_prefix, dead_prefix, ttl = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local source, dead_maxlen, entry_prefix = ARGV[7], ARGV[8], ARGV[9]
redis.call('ZREM', buckets, bucket)
local fields = redis.call('HKEYS', bucket)
local ids = {}
for _, f in ipairs(fields) do if string.sub(f, 1, 2) == 't:' then table.insert(ids, string.sub(f, 3)) end end
if #ids == 0 then return {'empty'} end
if #ids < 2 then
  local tid = ids[1]
  if redis.call('SET', dead_prefix .. tid, 'group_timeout', 'NX', 'EX', ttl) then
    redis.call('XADD', dead, 'MAXLEN', '~', dead_maxlen, '*', 'id', tid,
               'reason', 'group_timeout: alone in its group after the timeout',
               'source', source, 'data', redis.call('HGET', bucket, 't:' .. tid))
  end
  local eid = redis.call('GET', entry_prefix .. tid)
  if eid then
    redis.call('XDEL', source, eid)
    redis.call('DEL', entry_prefix .. tid)
  end
  redis.call('DEL', bucket)
  return {'lone', tid}
end
table.sort(ids)
local gid = redis.sha1hex(table.concat(ids, ','))
redis.call('RENAME', bucket, claim_prefix .. gid)
redis.call('HSET', claim_prefix .. gid, 'partial', '1')
redis.call('ZADD', claims, now, gid)
if #ids < G then redis.call('SET', sealed, G - #ids, 'EX', late_ttl) end
return {'partial', gid}
"""

_EMIT = """
local claim, claims, groups, emitted, trajectories = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local gid, payload, maxlen, ttl, partial, entry_prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
-- ARGV[7]: JSON list of the live consumer groups (workers/backlog.py); a group not in it is a leftover and does not
-- count while one in it is there; an empty list counts every group
local live = {}
for _, name in ipairs(cjson.decode(ARGV[7])) do live[name] = true end
local any_live = next(live) ~= nil
if redis.call('EXISTS', emitted) == 1 then
  redis.call('DEL', claim); redis.call('ZREM', claims, gid)
  return 'duplicate'
end
if redis.call('EXISTS', claim) == 0 then return 'gone' end
local backlog = redis.call('XLEN', groups)
if backlog >= maxlen then
  -- the length counts consumed entries too: what matters is what the readers (consumer groups) still owe
  local infos = redis.call('XINFO', 'GROUPS', groups)
  if #infos > 0 then
    backlog = 0
    for _, g in ipairs(infos) do
      local t = {}
      for i = 1, #g, 2 do t[g[i]] = g[i + 1] end
      if live[t['name']] or not any_live then
        local lag = t['lag']
        if not lag then lag = redis.call('XLEN', groups) end  -- unknown lag (after deletions): assume all
        backlog = math.max(backlog, t['pending'] + lag)
      end
    end
  end
end
if backlog >= maxlen then
  redis.call('ZADD', claims, 0, gid)  -- oldest first: the sweep retries it as soon as there is room
  return 'full'
end
redis.call('XADD', groups, '*', 'data', payload, 'id', gid, 'partial', partial)
-- the members are in the group now: their trajectory entries leave the stream
for _, f in ipairs(redis.call('HKEYS', claim)) do
  if string.sub(f, 1, 2) == 't:' then
    local entry_key = entry_prefix .. string.sub(f, 3)
    local eid = redis.call('GET', entry_key)
    if eid then
      redis.call('XDEL', trajectories, eid)
      redis.call('DEL', entry_key)
    end
  end
end
redis.call('SET', emitted, '1', 'EX', ttl)
redis.call('DEL', claim); redis.call('ZREM', claims, gid)
return 'emitted'
"""


@dataclass
class AddOutcome:
    status: str
    """'pending' | 'complete' | 'late' | 'duplicate'"""
    group_id: str | None = None
    fresh_reward: bool = False
    """The reward was stored by this call (not a stored one reused)."""


class GroupAssembler:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        group_size: int,
        version_window: int,
        ttl_s: int,
        max_groups_len: int,
        late_window_s: float,
        dead_maxlen: int = DEAD_MAXLEN,
        stale_group_s: float = 3600.0,
    ):
        self.client = client
        self.dead_maxlen = dead_maxlen
        self.keys = keys
        self.group_size = group_size
        self.version_window = version_window
        self.ttl_s = ttl_s
        self.max_groups_len = max_groups_len
        self.late_window_s = late_window_s
        self.stale_group_ms = int(stale_group_s * 1000)
        self._add, self._seal, self._emit = LuaScript(_ADD), LuaScript(_SEAL), LuaScript(_EMIT)

    def bucket_of(self, traj: Trajectory) -> str:
        """Trajectories sharing a `group_key` (serve gives the n rollouts of one agent-run request one) form one
        group even when a weight swap landed between them: splitting them by version would strand members as lone
        dead letters while the learner publishes every step, and their behaviour logprobs already correct for the
        version gap. Other trajectories share a group by task and policy-version window. The task is in the
        bucket's name either way, so a key reused across tasks cannot mix them."""
        if traj.group_key:
            return self.keys.bucket(traj.task_id, f"key-{traj.group_key}")
        return self.keys.bucket(traj.task_id, traj.policy_version // self.version_window)

    def add(
        self,
        traj: Trajectory,
        traj_payload: bytes,
        reward: Reward,
        reward_key: str,
        stats_stream: str,
        stats: RewardStats | None,
        stats_maxlen: int,
        batch: ScriptBatch,
        stream_entry: str | None = None,
    ) -> None:
        """Queue the atomic add on `batch`: store the reward unless one is stored, write the stats entry when it
        is new, join the bucket, remember the trajectory's `stream_entry` (its id in `slca:trajectories`, deleted
        when the group is written). The reply, via `parse_add`, is [status, group id, fresh]."""
        bucket = self.bucket_of(traj)
        keys = [
            self.keys.member(traj.id),
            bucket,
            self.keys.buckets,
            self.keys.sealed(bucket),
            self.keys.claims,
            reward_key,
            stats_stream,
            self.keys.entry(traj.id),
            self.keys.streams.trajectories,
        ]
        args = [
            traj.id,
            traj_payload,
            reward.model_dump_json(),
            self.group_size,
            time.time(),
            self.ttl_s,
            self.keys.claim_prefix,
            json.dumps([x for kv in stats.to_fields().items() for x in kv]) if stats else "",
            stats_maxlen,
            stream_entry or "",
        ]
        batch.add(self._add, keys, args)

    @staticmethod
    def parse_add(reply) -> AddOutcome:
        status, gid, fresh = [x.decode() if isinstance(x, bytes) else x for x in reply]
        return AddOutcome(status, gid or None, fresh == "1")

    def emit_many(self, group_ids: list[str]) -> list[tuple[str, bool]]:
        """Build each group from its claim and write it once; two round trips for any number of groups.
        Returns ('emitted' | 'duplicate' | 'gone' | 'full', partial) per group."""
        if not group_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        pipe.xlen(self.keys.streams.groups)
        for gid in group_ids:
            pipe.hgetall(self.keys.claim_prefix + gid)
        length, *claims = pipe.execute()
        # which readers count in the back-pressure: looked up only when the length alone may reach the bound (it
        # counts acknowledged entries too); the script reads the groups' backlog itself, atomically
        stream = self.keys.streams.groups
        live = live_groups(self.client, stream, self.stale_group_ms) if length >= self.max_groups_len else []
        batch = ScriptBatch(self.client)
        partials = []
        for gid, fields in zip(group_ids, claims):
            if not fields:
                partials.append(None)
                continue
            payload, partial = group_payload(gid, fields)
            partials.append(partial)
            keys = [
                self.keys.claim_prefix + gid,
                self.keys.claims,
                self.keys.streams.groups,
                self.keys.emitted(gid),
                self.keys.streams.trajectories,
            ]
            batch.add(
                self._emit,
                keys,
                [gid, payload, self.max_groups_len, self.ttl_s, int(partial), self.keys.entry_prefix, json.dumps(live)],
            )
        replies = iter(batch.execute())
        return [("gone", False) if p is None else (next(replies).decode(), p) for p in partials]

    def seal_expired(self, timeout_s: float) -> list[tuple[str, str]]:
        """Buckets open longer than the timeout → partial claims (or lone dead letters). Returns (status, id)."""
        cutoff = time.time() - timeout_s
        out = []
        for bucket in self.client.zrangebyscore(self.keys.buckets, "-inf", cutoff, start=0, num=1000):
            bucket = bucket.decode()
            keys = [bucket, self.keys.buckets, self.keys.sealed(bucket), self.keys.claims, self.keys.streams.dead]
            args = [
                self.group_size,
                time.time(),
                int(self.late_window_s),
                self.keys.claim_prefix,
                self.keys.base + ":dead:",
                self.ttl_s,
                self.keys.streams.trajectories,
                self.dead_maxlen,
                self.keys.entry_prefix,
            ]
            batch = ScriptBatch(self.client)
            batch.add(self._seal, keys, args)
            res = [x.decode() if isinstance(x, bytes) else x for x in batch.execute()[0]]
            out.append((res[0], res[1] if len(res) > 1 else ""))
        return out

    def stale_claims(self, older_than_s: float) -> list[str]:
        cutoff = time.time() - older_than_s
        return [g.decode() for g in self.client.zrangebyscore(self.keys.claims, "-inf", cutoff, start=0, num=1000)]


def group_payload(group_id: str, fields: dict[bytes, bytes]) -> tuple[bytes, bool]:
    """The msgpack of the `RolloutGroup` made of a claim's members (stored payloads and rewards), built and
    validated as the contract (one task, distinct ids, policy-version bounds, each trajectory whole) before it
    is written: a reader never sees a group the contract would refuse."""
    ids = sorted(k[2:] for k in fields if k.startswith(b"t:"))
    trajs = [load_msgpack(Trajectory, fields[b"t:" + tid]) for tid in ids]
    rewards = [Reward.model_validate_json(fields[b"r:" + tid]) for tid in ids]
    versions = [t.policy_version for t in trajs]
    partial = fields.get(b"partial") == b"1"
    group = RolloutGroup(
        group_id=group_id,
        task_id=trajs[0].task_id,
        policy_version_min=min(versions),
        policy_version_max=max(versions),
        trajectories=trajs,
        rewards=rewards,
        partial=partial,
    )
    return dump_msgpack(group), partial

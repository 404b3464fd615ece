"""A rate limit on LLM calls shared by every worker process through Redis: requests and tokens per minute,
with headroom kept for interactive jobs.

The algorithm is a sliding-window log (the `limits` library's "moving window", with a weight per entry for
tokens): each admitted call is an entry in a sorted set scored by its admission time, so "how many in the last minute"
is exact, never the up-to-twice-the-limit burst a fixed window or a full token bucket allows at a boundary.
Keys (all under finagent:ratelimit:{name}):
  :req   ZSET  one member per admitted call, "<b|i>:<uuid>" (batch or interactive), scored by admission time
  :tok   ZSET  the same calls as "<uuid>:<tokens>", scored by admission time
  :used  STR   the sum of the tokens in :tok, so admitting a call never scans the whole window
One Lua script prunes the entries that left the window, checks both limits and, only when both admit, records
the call: concurrent workers can never both take the last slot. Time is the Redis server's clock (TIME inside the
script), so workers on different hosts agree; tests inject their own clock instead.

Batch calls are admitted against `limit * batch_share`, interactive calls against the full limit: batch traffic
can never use the last (1 - share) of a window. A call whose tokens alone exceed its limit is admitted once the
window is otherwise empty (it could never be admitted otherwise).
Tokens are an estimate when the call is admitted; `reconcile` replaces the estimate with what the provider
reported, so the window holds the tokens really spent.
"""
from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel

# Whether the LLM calls made in this context belong to a batch job; the task running a job's call sets it.
BATCH_CALL: ContextVar[bool] = ContextVar("batch_call", default=False)

MAX_WAIT_S = 30.0  # a call waits at most this long for a slot, then the task retries later instead
SLEEP_STEP_S = 1.0  # re-check at least this often: a refund or a shorter wait may free a slot sooner
PREFIX = "finagent:ratelimit:"

_ACQUIRE = """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local window, req_limit, tok_limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tokens, id, kind = tonumber(ARGV[5]), ARGV[6], ARGV[7]
local horizon = now - window

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', horizon)
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', horizon)
if #expired > 0 then
  local freed = 0
  for _, member in ipairs(expired) do freed = freed + tonumber(string.match(member, ':(%-?%d+)$')) end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', horizon)
  redis.call('DECRBY', KEYS[3], freed)
end
if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('DEL', KEYS[3]) end  -- an empty window holds no tokens

local wait = 0
if req_limit > 0 then
  local count = redis.call('ZCARD', KEYS[1])
  if count + 1 > req_limit then
    -- the call fits once the (count + 1 - limit) oldest calls have left the window
    local nth = redis.call('ZRANGE', KEYS[1], count - req_limit, count - req_limit, 'WITHSCORES')
    wait = math.max(wait, tonumber(nth[2]) + window - now)
  end
end
if tok_limit > 0 then
  local used = tonumber(redis.call('GET', KEYS[3]) or '0')
  if used > 0 and used + tokens > tok_limit then
    local needed = math.min(used + tokens - tok_limit, used)
    local freed, at = 0, now
    local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    for i = 1, #entries, 2 do
      freed = freed + tonumber(string.match(entries[i], ':(%-?%d+)$'))
      at = tonumber(entries[i + 1])
      if freed >= needed then break end
    end
    wait = math.max(wait, at + window - now)
  end
end

if wait > 0 then
  return {0, tostring(wait), tostring(now)}
end
local ttl = math.ceil(window * 1000) + 1000
redis.call('ZADD', KEYS[1], now, kind .. ':' .. id)
redis.call('ZADD', KEYS[2], now, id .. ':' .. tokens)
redis.call('INCRBY', KEYS[3], tokens)
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
return {1, '0', tostring(now)}
"""

# Reconcile (ARGV[4] '0'): replace a call's token entry, at its admission time, and the window's sum.
# Release (ARGV[4] '1'): take the call out of the window altogether. A call already out of the window is left alone.
_RECONCILE = """
local old = ARGV[1] .. ':' .. ARGV[2]
local score = redis.call('ZSCORE', KEYS[1], old)
if not score then return 0 end
redis.call('ZREM', KEYS[1], old)
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[3], ARGV[5])
  redis.call('DECRBY', KEYS[2], tonumber(ARGV[2]))
else
  redis.call('ZADD', KEYS[1], score, ARGV[1] .. ':' .. ARGV[3])
  redis.call('INCRBY', KEYS[2], tonumber(ARGV[3]) - tonumber(ARGV[2]))
end
return 1
"""


class Reservation(BaseModel):
    """An admitted call: its id in the window and the tokens it holds there."""

    id: str
    kind: str  # "b" batch, "i" interactive
    tokens: int
    admitted_at: float


class Admission(BaseModel):
    admitted: bool
    wait_s: float = 0.0  # when refused: how long until the call would fit
    reservation: Reservation | None = None


class RateLimitedError(Exception):
    """The shared LLM rate limit kept a call waiting longer than it may wait; the task retries it later."""

    def __init__(self, name: str, retry_after_s: float):
        self.name = name
        self.retry_after_s = max(0.0, float(retry_after_s))
        super().__init__(f"{name}: shared rate limit reached; a slot frees up in about {self.retry_after_s:.1f} s")


class RateLimiter:
    def __init__(self, redis: Any, name: str = "llm", *, requests_per_minute: int = 0, tokens_per_minute: int = 0,
                 batch_share: float = 1.0, clock: Callable[[], float] | None = None, window_s: float = 60.0):
        """`clock` None reads the Redis server's clock; `window_s` is for tests only (the limits are per minute)."""
        if not 0 < batch_share <= 1:
            raise ValueError("batch_share must be in (0, 1]")
        self.redis = redis
        self.name = name
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.batch_share = batch_share
        self.clock = clock
        self.window_s = float(window_s)
        self.keys = [f"{PREFIX}{name}:req", f"{PREFIX}{name}:tok", f"{PREFIX}{name}:used"]
        self._acquire = redis.register_script(_ACQUIRE)
        self._reconcile = redis.register_script(_RECONCILE)

    @property
    def enabled(self) -> bool:
        return self.requests_per_minute > 0 or self.tokens_per_minute > 0

    def limits(self, batch: bool) -> tuple[int, int]:
        """The (requests, tokens) a window may hold for a call of this kind; 0 = that limit is off."""
        if not batch:
            return self.requests_per_minute, self.tokens_per_minute
        return _share(self.requests_per_minute, self.batch_share), _share(self.tokens_per_minute, self.batch_share)

    def acquire(self, tokens: int, batch: bool) -> Admission:
        """Admit one call of `tokens` (estimated) tokens now, or say how long until it would fit."""
        tokens = max(0, int(tokens))
        if not self.enabled:
            return Admission(admitted=True)
        req_limit, tok_limit = self.limits(batch)
        call_id, kind = uuid.uuid4().hex, "b" if batch else "i"
        now = "" if self.clock is None else repr(self.clock())
        admitted, wait, at = self._acquire(keys=self.keys, args=[now, self.window_s, req_limit, tok_limit, tokens, call_id, kind])
        if int(admitted):
            return Admission(admitted=True, reservation=Reservation(id=call_id, kind=kind, tokens=tokens, admitted_at=float(at)))
        return Admission(admitted=False, wait_s=float(wait))

    def reconcile(self, reservation: Reservation | None, actual_tokens: int) -> None:
        """Replace the call's estimate with the tokens it really used (adds or refunds the difference)."""
        if reservation is not None and int(actual_tokens) != reservation.tokens:
            self._reconcile(keys=[self.keys[1], self.keys[2], self.keys[0]],
                            args=[reservation.id, reservation.tokens, max(0, int(actual_tokens)), "0", ""])
            reservation.tokens = max(0, int(actual_tokens))

    def release(self, reservation: Reservation | None) -> None:
        """Give the whole slot back: the call never reached the provider."""
        if reservation is not None:
            self._reconcile(keys=[self.keys[1], self.keys[2], self.keys[0]],
                            args=[reservation.id, reservation.tokens, 0, "1", f"{reservation.kind}:{reservation.id}"])
            reservation.tokens = 0

    def wait(self, tokens: int, batch: bool, max_wait_s: float = MAX_WAIT_S,
             sleep: Callable[[float], None] = time.sleep, on_wait: Callable[[float], None] | None = None) -> Reservation | None:
        """Block until the call is admitted, sleeping in short steps; raise RateLimitedError rather than wait more
        than `max_wait_s` in all. Returns the reservation (None when the limiter is off)."""
        waited = 0.0
        while True:
            admission = self.acquire(tokens, batch)
            if admission.admitted:
                return admission.reservation
            if waited + admission.wait_s > max_wait_s:
                raise RateLimitedError(self.name, admission.wait_s)
            if on_wait is not None and waited == 0.0:
                on_wait(admission.wait_s)
            # a little jitter so the workers that wait on the same slot do not all retry at the same instant
            step = min(admission.wait_s, SLEEP_STEP_S) + random.uniform(0, 0.05)
            sleep(step)
            waited += step

    def window(self) -> list[tuple[str, float]]:
        """The calls in the current window (members "<b|i>:<uuid>" and their admission times), oldest first."""
        return [(m, float(s)) for m, s in self.redis.zrange(self.keys[0], 0, -1, withscores=True)]

    def tokens_used(self) -> int:
        """The tokens the window holds (entries that left it are pruned at the next admission)."""
        return int(self.redis.get(self.keys[2]) or 0)


def _share(limit: int, share: float) -> int:
    return max(1, int(limit * share)) if limit > 0 else 0

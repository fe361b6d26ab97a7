"""Redis backend: one connection pool per worker, every key under a configurable prefix.

Atomic steps are Lua scripts from `backend/lua/`, called by SHA (`LuaScript`; loaded again if the server
lost it). Every Redis failure surfaces as `BackendUnavailable`.

After Redis restarts, every pooled connection is dead. Two rules make the first calls after it succeed:

- A connection the server has closed is replaced when it is taken from the pool, before anything is
  written on it: redis-py does that check, and this module keeps it on (see `RedisBackend.__init__`).
  This covers every command, including the ones that must never run twice.
- A call whose connection breaks once the command may have been written (`Connection closed by server`
  on the reply: the server may or may not have run it) is retried once, on a fresh connection, only if
  running it twice has the effect of running it once: the calls marked `@idempotent` — reads, `SET`,
  `DEL`, `PUBLISH`, the session store, a compare-and-delete, and the quota scripts, which are idempotent
  by hold id or adjustment ref. Rate-limit charges, counters (`gcra_multi.lua`, `incr_ttl.lua`) and
  `SET … NX` (a lock taken) are `@guarded` only: after an ambiguous failure they answer
  `BackendUnavailable` rather than risk counting twice or finding their own lock taken.
A timeout is never retried (the deadline covers the whole call, retry included).

Pub/sub channels are named `<prefix><name>:db<n>`, `n` the database number of `REDIS_URL`: Redis delivers
a message to every subscriber of the channel name on the whole server, whatever database either side
selected, so without the number two deployments on one server (different databases, the same prefix)
would hear each other's broadcasts. The key prefix and the database together are what a deployment is.

On a Redis Cluster (`RedisBackend(nodes=…)`, `REDIS_CLUSTER_NODES`) the client is redis-py's asyncio
`RedisCluster`: it finds the other nodes from the seeds, sends each command to the master of its key's
slot and follows MOVED and ASK redirections. What differs:

- One atomic step (a Lua script, a MULTI) must touch one slot. The keys that are changed together share a
  hash tag, declared once in `SLOT_GROUPS` (`key()` applies it on a cluster only, so a single Redis keeps
  its key names): the version counters and the records' shared copies (`set_text_if_version` compares
  one with the other), a user's sessions and their index, the e-mail sending limits (per IP and per
  address, checked together; rare). The limits of one `gcra_many` must share a slot: the caller tags
  them (the API limits of one IP: `rl:api:{<ip>}`), and limits in several slots are refused with a
  ValueError (a bug, not a Redis fault).
- redis-py's own cluster retries are off (`Retry(NoBackoff(), 0)`): after a connection error it would
  run any command again, and a charge must not run twice. A failed call — a command, a pipeline or a
  script, each through `_wrap` — marks the topology stale; the next call rediscovers it (a failover: the
  promoted replica). The `@idempotent` calls are
  retried as on one server — also after CLUSTERDOWN or TRYAGAIN, replies of a command that did not run,
  and after a connection refused by a dead master not yet replaced — with a short pause, until the
  deadline; the others answer `BackendUnavailable`. (A store built on the backend names it as `backend`:
  its deadline, error observer and `cluster` flag govern the store's calls too.)
- Scripts are called by SHA on the node that serves their keys; a node that does not know one (a
  promoted replica: SCRIPT LOAD is not replicated) answers NOSCRIPT, and the script is loaded on every
  master and called again (`LuaScript`).
- Broadcasts use classic PUBLISH/SUBSCRIBE: the cluster bus delivers a message to the subscribers on
  every node, so a worker may listen on any node, and a failover of that node only breaks its
  connection (it resubscribes, and reloads what it may have missed, as after a Redis restart). Sharded
  pub/sub (SPUBLISH) would confine a channel to one shard — cheaper for many busy channels, but this is
  one quiet channel that every worker must hear, and a shard's subscriptions are dropped on every slot
  migration.
- The scripts are pipelined as on one server, on a connection per master (`redis_pipe.ClusterPipes`);
  a redirection hands the call to redis-py's cluster client, which follows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ClusterDownError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as LostConnection
from redis.exceptions import TimeoutError as RedisTimeout
from redis.maint_notifications import MaintNotificationsConfig

from backend import lua
from backend.base import (
    MAX_AHEAD_NS,
    NO_LIMIT,
    SUBSCRIBED,
    BackendUnavailable,
    Limit,
    RateResult,
    active_limits,
)
from backend.observer import ErrorKind, ErrorObserver, ignore_error
from backend.redis_pipe import ClusterPipes, RedisPipe
from backend.slots import DEFAULT_PARTITIONS, tag
from backend.versions import NAMES, Versions

P = ParamSpec("P")
T = TypeVar("T")
Client = aioredis.Redis | RedisCluster

# On a cluster, the names (after the prefix) that must share a slot with others, and their hash tag:
# `set_text_if_version` reads the version counters and writes a record's copy in one script; a session,
# its user's index and a rotated session change in one MULTI.
SLOT_GROUPS: tuple[tuple[str, str], ...] = (("ver", "ver"), ("rec:", "ver"), ("session:", "session"),
                                            ("email_send:", "email_send"))
CLUSTER_RETRY_PAUSE = 0.1  # seconds between two attempts of an idempotent call on a cluster


def _lost_connection(exc: BaseException) -> bool:
    """The connection broke (closed or reset by the server); not a timeout, not a refused login."""
    if isinstance(exc, (AuthenticationError, AuthorizationError)):
        return False
    return isinstance(exc, (LostConnection, ConnectionResetError, BrokenPipeError))


def error_kind(exc: BaseException) -> ErrorKind:
    """How a failed Redis call is counted (`RedisBackend.on_error`)."""
    if isinstance(exc, (TimeoutError, RedisTimeout)):
        return ErrorKind.TIMEOUT
    if isinstance(exc, (LostConnection, OSError)):
        return ErrorKind.CONNECTION
    return ErrorKind.OTHER


def _cluster_in_flux(exc: BaseException) -> bool:
    """A cluster reply of a command that did not run: the slot's master is failing over (CLUSTERDOWN),
    not yet known (a stale slot map) or its keys are being migrated (TRYAGAIN); or the master the slot
    map names refused the connection (it died and its replica is not yet promoted: nothing was sent)."""
    return isinstance(exc, (ClusterDownError, SlotNotCoveredError, TryAgainError, ConnectionRefusedError))


def _wrap(fn: Callable[P, Coroutine[Any, Any, T]], *, retry: bool) -> Callable[P, Coroutine[Any, Any, T]]:
    @wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        # the object the method is called on: the backend, or a store built on it (its `backend`), whose
        # deadline, error observer and kind (`timeout`, `on_error`, `cluster`) bound and count the call
        owner: Any = args[0]
        backend: RedisBackend = owner if isinstance(owner, RedisBackend) else owner.backend
        timeout, cluster = backend.timeout, backend.cluster
        try:
            async with asyncio.timeout(timeout):
                try:
                    return await fn(*args, **kwargs)
                except (RedisError, RedisClusterException, OSError) as exc:
                    if not (retry and (_lost_connection(exc) or _cluster_in_flux(exc))):
                        raise
                if not cluster:
                    # redis-py dropped the broken connection; the pool hands out connected ones only (a
                    # closed one is replaced when taken), so the second attempt runs on a fresh connection.
                    return await fn(*args, **kwargs)
                while True:  # a failover takes seconds: try again until the deadline (module docstring)
                    backend.stale()
                    await asyncio.sleep(CLUSTER_RETRY_PAUSE)
                    try:
                        return await fn(*args, **kwargs)
                    except (RedisError, RedisClusterException, OSError) as exc:
                        if not (_lost_connection(exc) or _cluster_in_flux(exc)):
                            raise
        except (TimeoutError, RedisError, RedisClusterException, OSError) as exc:
            backend.stale()  # on a cluster, the next call learns the slot map first (a failover?)
            # (RedisClusterException: no node of the cluster could be reached, or a bug: keys of one
            # step in several slots; the message names it)
            backend.on_error(error_kind(exc))
            raise BackendUnavailable(f"redis unavailable: {type(exc).__name__}: {exc}"[:300]) from exc

    return wrapper


def _guard(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Bound the call by the backend's timeout and turn every Redis failure into BackendUnavailable.

    The deadline is an `asyncio.timeout` around the whole call rather than redis-py's `socket_timeout`,
    which wraps every socket read in `asyncio.wait_for` (a task per read: a third of the client's cost
    on the hot path). redis-py drops a connection whose command was interrupted, so none is reused
    mid-reply. Not retried: for calls that must not run twice (see the module docstring)."""
    return _wrap(fn, retry=False)


def idempotent(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """`_guard`, plus one retry on a fresh connection when the connection broke during the call.

    Only for a call that may run twice with the effect of running once (the whole call is run again,
    within the same deadline): see the module docstring."""
    return _wrap(fn, retry=True)


guarded = _guard


def channel_name(prefix: str, db: int, name: str) -> str:
    """The Redis name of pub/sub channel `name` for the deployment with key prefix `prefix` in database `db`
    (see the module docstring)."""
    return f"{prefix}{name}:db{db}"


class LuaScript:
    """A Lua script called by SHA in one command, and loaded again after the server lost it: over the
    backend's pipelined connection (`redis_pipe.RedisPipe`) when it has one, else redis-py's pool.

    (redis-py's `Script` goes through `evalsha`, whose deprecation-checking wrapper and per-call import
    were a noticeable share of a reserve + settle pair: docs/PERFORMANCE.md#figures-behind-the-code.)"""

    def __init__(self, client: Client, source: str, pipe: RedisPipe | ClusterPipes | None = None) -> None:
        self.client = client
        self.run: Callable[..., Coroutine[Any, Any, Any]] = (
            pipe.execute if pipe is not None else client.execute_command)
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    async def __call__(self, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return await self.run("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            # on a cluster, SCRIPT LOAD goes to every master (redis-py's default for it)
            self.sha = await self.client.script_load(self.source)
            return await self.run("EVALSHA", self.sha, len(keys), *keys, *args)


class _Cluster(RedisCluster):
    """redis-py's cluster client, whose topology is (re)learned before a command is routed, not during.

    A client that did not know the topology yet (new, or after a connection error marked it stale)
    and was given several commands at once failed some of them with `Connection closed by server` —
    measured: 4 to 13 of 20 concurrent INCRs on a new client (redis-py 8.1), none once initialized. So
    every command first waits for the (one, locked) initialization."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self._initialize:
            await self.initialize()
        return await super().execute_command(*args, **kwargs)

    def stale(self) -> None:
        """The slot map may be out of date (a connection to a node broke): learn it before the next
        command or pipeline. (redis-py marks it so itself after a failed command, but not after a failed
        pipeline: a client whose calls to a dead master's slots were all pipelines kept sending them
        there after its replica had taken over — measured: every sweep failed for 30 s and more.)"""
        self._initialize = True


class RedisBackend:
    """One Redis server (`url`, `REDIS_URL`) or a Redis Cluster (`nodes`, a few seeds of it:
    `REDIS_CLUSTER_NODES`). `on_error` (backend/observer.py) is told the kind of every failed call, by this
    backend and by the stores built on it (each counted once, after its retries if it had any).
    `partitions`: how many partitions the deployment's state has (backend/slots.py; the quota state's,
    quota/partitions.py); each keeps a copy of the version counters (`bump`)."""

    def __init__(self, url: str | None = None, prefix: str = "tollway:", *, timeout: float = 2.0,
                 max_connections: int = 64, nodes: Sequence[tuple[str, int]] = (),
                 on_error: ErrorObserver = ignore_error, partitions: int = DEFAULT_PARTITIONS) -> None:
        if (url is None) == (not nodes):
            raise ValueError("RedisBackend: give either a url or cluster nodes")
        self.prefix = prefix
        self.partitions = partitions
        self.timeout = timeout
        self.on_error = on_error
        self.cluster = bool(nodes)
        self.nodes = tuple(nodes)  # the cluster's seeds (empty on one server)
        self.client: Client
        if url is not None:
            # A blocking pool: when every connection is busy a command waits for one (within the `_guard`
            # deadline) instead of failing at once with MaxConnectionsError, as the default pool does —
            # measured: 9 of 5,464 calls answered 503 at 64 concurrent callers before this.
            pool = aioredis.BlockingConnectionPool.from_url(
                url,
                decode_responses=True,
                socket_timeout=None,  # deadlines come from `_guard` (see there)
                socket_connect_timeout=timeout,
                health_check_interval=30,
                max_connections=max_connections,
                timeout=None,  # the wait is bounded by `_guard`
                # redis-py 8 skips its check for connections the server closed (the pool replaces them
                # when they are taken) while RESP3 maintenance notifications are on, which they are by
                # default; after a Redis restart every pooled connection then failed once. We use none.
                maint_notifications_config=MaintNotificationsConfig(enabled=False),
            )
            self.client = aioredis.Redis(connection_pool=pool)
            self.db = int(pool.connection_kwargs.get("db") or 0)  # the database `REDIS_URL` selects
            # the scripts (the quota steps and rate limits: the model call's hot path) are pipelined on a
            # connection of their own
            self.pipe: RedisPipe | ClusterPipes | None = (
            RedisPipe(url, connect_timeout=timeout) if RedisPipe.supports(url) else None)
        else:
            cluster = _Cluster(
                startup_nodes=[ClusterNode(host, port) for host, port in nodes],
                decode_responses=True,
                socket_timeout=None,  # deadlines come from `_guard`
                socket_connect_timeout=timeout,
                health_check_interval=30,
                max_connections=max_connections * 4,  # per node; a cluster node's pool never waits
                retry=Retry(NoBackoff(), 0),  # no blind retries: see the module docstring
                maint_notifications_config=MaintNotificationsConfig(enabled=False),
            )
            self.client = cluster
            self.db = 0  # a cluster has database 0 only
            # the scripts pipelined as on one server, on a connection per master
            self.pipe = ClusterPipes(cluster, connect_timeout=timeout)
        self._gcra = self.script(lua.load("gcra_multi", "gcra"))
        self._incr = self.script(lua.load("incr_ttl"))
        self._bump = self.script(lua.load("bump"))
        self._raise_versions = self.script(lua.load("raise_versions"))
        self._set_if = self.script(lua.load("set_if_version"))
        self._del_if = self.script(lua.load("delete_if_equal"))
        self.versions_key = self.key("ver")  # the counters; management requests read them here
        # each partition's copy, read by the reservations of that partition (backend/versions.py)
        self.version_copies = [self.key(f"ver:{tag(p)}") for p in range(partitions)]

    def key(self, name: str) -> str:
        """The Redis key of `name`: under the prefix and, on a cluster, with the hash tag of its slot
        group (`SLOT_GROUPS`) when it has one."""
        if self.cluster:
            for start, group in SLOT_GROUPS:
                if name == start or (start.endswith(":") and name.startswith(start)):
                    return f"{self.prefix}{{{group}}}{name}"
        return self.prefix + name

    def stale(self) -> None:
        """On a cluster, the slot map may be out of date: the next call learns it again (`_Cluster.stale`).
        Nothing on one server."""
        if isinstance(self.client, _Cluster):
            self.client.stale()

    def slot(self, key: str) -> int:
        """The cluster slot of the Redis key `key` (0 on one server: every key is together)."""
        return self.client.keyslot(key) if isinstance(self.client, RedisCluster) else 0

    def channel(self, name: str) -> str:
        """The pub/sub channel `name` of this deployment (see the module docstring)."""
        return channel_name(self.prefix, self.db, name)

    def script(self, source: str) -> LuaScript:
        return LuaScript(self.client, source, self.pipe)

    @idempotent
    async def ping(self) -> None:
        await self.client.ping()

    async def gcra(self, key: str, limit: int, period: float, cost: int = 1) -> RateResult:
        if limit < 1 or period <= 0:
            raise ValueError("gcra: limit must be ≥ 1 and period > 0")
        return await self.gcra_many([Limit(key, limit, period, cost)])

    async def gcra_many(self, limits: Sequence[Limit]) -> RateResult:
        active = active_limits(limits)
        if not active:
            return RateResult(True, NO_LIMIT, 0.0)
        return await self._run_gcra(active, force=False)

    async def gcra_charge(self, *limits: Limit) -> None:
        active = [limit for limit in active_limits(limits) if limit.cost > 0]
        if active:
            await self._run_gcra(active, force=True)

    @_guard
    async def _run_gcra(self, limits: list[Limit], *, force: bool) -> RateResult:
        keys = [self.key(limit.key) for limit in limits]
        if self.cluster and len({self.slot(key) for key in keys}) > 1:
            raise ValueError(f"gcra: on a Redis Cluster the limits of one call must share a slot (a hash "
                             f"tag in their keys): {[limit.key for limit in limits]}")
        args: list[int] = [int(force), MAX_AHEAD_NS]
        for limit in limits:
            args += [limit.interval_ns, limit.count, limit.cost]
        allowed, remaining, retry_ns, refused = await self._gcra(keys=keys, args=args)
        refused_by = limits[int(refused) - 1].key if int(refused) > 0 else None
        return RateResult(bool(allowed), int(remaining), int(retry_ns) / 1e9, refused_by)

    @_guard
    async def incr(self, key: str, ttl: float) -> int:
        return int(await self._incr(keys=[self.key(key)], args=[max(1, int(ttl * 1000))]))

    @idempotent
    async def get_int(self, key: str) -> int:
        value = await self.client.get(self.key(key))
        return int(value) if value is not None else 0

    @idempotent
    async def ttl(self, key: str) -> float:
        ms = await self.client.pttl(self.key(key))
        return max(0.0, ms / 1000.0)

    @idempotent
    async def delete(self, *keys: str) -> None:
        if keys:
            await self.client.delete(*(self.key(k) for k in keys))

    @idempotent
    async def get_text(self, key: str) -> str | None:
        value = await self.client.get(self.key(key))
        return str(value) if value is not None else None

    @idempotent
    async def set_text(self, key: str, value: str, ttl: float) -> None:
        await self.client.set(self.key(key), value, px=max(1, int(ttl * 1000)))

    @guarded
    async def set_text_if_absent(self, key: str, value: str, ttl: float) -> bool:
        # Not retried: after an ambiguous failure a second SET NX would find our own value and say False.
        return bool(await self.client.set(self.key(key), value, px=max(1, int(ttl * 1000)), nx=True))

    @idempotent
    async def delete_if_equal(self, key: str, value: str) -> bool:
        return int(await self._del_if(keys=[self.key(key)], args=[value])) == 1

    @guarded
    async def take_text(self, key: str) -> str | None:
        # Not retried: a GETDEL that ran before the connection broke took the value; a retry would say
        # None, which for a single-use secret is the safe answer anyway, but the caller should see the fault.
        value = await self.client.getdel(self.key(key))
        return str(value) if value is not None else None

    @idempotent
    async def versions(self) -> Versions:
        v = await self.client.hmget(self.versions_key, list(NAMES))
        return (int(v[0] or 0), int(v[1] or 0), int(v[2] or 0))

    @idempotent
    async def bump(self, name: str) -> int:
        """Bump `name` in the counters, then raise every partition's copy to the counters (pipelined: the
        calls issued in one turn of the loop go out in one write) before answering: a reservation in any
        partition that starts after this returns at least the new value. A copy never exceeds the counters
        (it only takes values read from them), and never falls (raises only): concurrent bumps leave every
        copy at the counters' value. Run twice (a retry), it bumps twice, which only announces a change
        that did not happen."""
        bumped, *values = await self._bump(keys=[self.versions_key], args=[name, *NAMES])
        pairs = [str(v) for pair in zip(NAMES, values, strict=True) for v in pair]
        await asyncio.gather(*(self._raise_versions(keys=[copy], args=pairs) for copy in self.version_copies))
        return int(bumped)

    @idempotent
    async def get_text_versioned(self, key: str, name: str) -> tuple[str | None, int]:
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.get(self.key(key))
            pipe.hget(self.versions_key, name)
            text, version = await pipe.execute()
        return (str(text) if text is not None else None), int(version or 0)

    @idempotent
    async def set_text_if_version(self, key: str, value: str, ttl: float, name: str, version: int) -> bool:
        return int(await self._set_if(keys=[self.key(key), self.versions_key],
                                      args=[value, max(1, int(ttl * 1000)), name,
                                            str(version) if version else ""])) == 1

    @idempotent
    async def publish(self, channel: str, message: str) -> None:
        await self.client.publish(self.channel(channel), message)

    async def subscribe(self, *channels: str) -> AsyncIterator[tuple[str, str]]:
        """Yield messages; on a lost connection, resubscribe after a short pause (never raises)."""
        names = {self.channel(c): c for c in channels}
        stale = False
        while True:
            try:
                if isinstance(self.client, RedisCluster):
                    # the node is picked from the slot map: learn it (first use), or learn it again after
                    # a failure (a failover: the node we listened on may be gone)
                    await (self.client.nodes_manager.initialize() if stale else self.client.initialize())
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            except (TimeoutError, RedisError, RedisClusterException, OSError):
                stale = True
                await asyncio.sleep(0.5)
                continue
            try:
                stale = False
                await pubsub.subscribe(*names)
                yield "", SUBSCRIBED
                while True:
                    msg: Any = await pubsub.get_message(timeout=1.0)
                    if msg is not None and msg.get("type") == "message":
                        yield names.get(msg["channel"], msg["channel"]), msg["data"]
            except (TimeoutError, RedisError, RedisClusterException, OSError):
                stale = True
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call,unused-ignore]  # typed in newer redis-py

    async def close(self) -> None:
        if self.pipe is not None:
            await self.pipe.close()
        if isinstance(self.client, RedisCluster):
            await self.client.aclose()
        else:
            await self.client.aclose(close_connection_pool=True)  # passed in: not closed by default

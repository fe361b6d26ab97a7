"""A real Redis Cluster of the test's own: three masters with one replica each, on 127.0.0.1.

Six `redis-server --cluster-enabled yes` processes in a temporary directory (no persistence: a replica
takes over from memory), joined by `redis-cli --cluster create … --cluster-replicas 1`. The cluster is
ready when every node reports `cluster_state:ok`, knows all six nodes, and every replica's link to its
master is up (a replica that never synced cannot be promoted). Every process is stopped by its pid at the
end, also when the start failed half-way.

`own_cluster(directory)` is the context manager; `redis_cluster` (tests/conftest.py) is one cluster per
test session, shared by the tests that run on it under their own key prefix. A test that kills a node
(`kill_master`) starts a cluster of its own, so that the session's stays whole. With `CI=true` a cluster
that cannot start fails the test (tests/services.py `unavailable`), never skips it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster

from backend.redis import RedisBackend
from tests.redis_server import START_DEADLINE, reap
from tests.services import delete_prefix, unavailable

MASTERS = 3
NODE_TIMEOUT_MS = 2000  # how long a master may be silent before its replica takes over
BUS_OFFSET = 10_000  # Redis' cluster bus listens on the client port + 10000
CALL_DEADLINE = 30.0  # seconds: a test backend's deadline on the cluster (see `Cluster.backend`)


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_ports(count: int) -> list[int]:
    """Ports whose bus port (+10000) is free too; both are checked, then released for the servers."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port + BUS_OFFSET < 65536 and port not in ports and _free(port + BUS_OFFSET):
            ports.append(port)
    return ports


def command(port: int, *args: str, timeout: float = 2.0) -> str:
    """One command through `redis-cli` (text reply; empty when the node does not answer)."""
    try:
        done = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args], capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return ""
    return done.stdout if done.returncode == 0 else ""


def _info(text: str) -> dict[str, str]:
    return dict(line.strip().split(":", 1) for line in text.splitlines() if ":" in line)


@dataclass
class Node:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Cluster:
    """The six processes, by port; the masters and replicas as the cluster reports them now."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.nodes: dict[int, Node] = {}
        self._killed: set[int] = set()

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        """Every live node, as seeds for a client (any one would do)."""
        return tuple(("127.0.0.1", n.port) for n in self.nodes.values() if n.alive)

    @property
    def seeds(self) -> str:
        """`REDIS_CLUSTER_NODES` for this cluster."""
        return ",".join(f"{host}:{port}" for host, port in self.addresses)

    def backend(self, prefix: str, *, timeout: float = CALL_DEADLINE, **kwargs: Any) -> RedisBackend:
        """The production backend on this cluster, under `prefix`. Its deadline bounds a hang, not the
        machine's speed: a client's first call learns the slot map from the nodes, which on a loaded
        machine took longer than the production default of 2 s. A test about the deadline passes its own."""
        return RedisBackend(prefix=prefix, nodes=self.addresses, timeout=timeout, **kwargs)

    async def purge(self, prefix: str) -> None:
        """Delete every key under `prefix` on every master."""
        nodes = [ClusterNode(host, port) for host, port in self.addresses]
        await delete_prefix(RedisCluster(startup_nodes=nodes), prefix)

    def start(self) -> None:
        for port in _free_ports(2 * MASTERS):
            workdir = self.directory / str(port)
            workdir.mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
                 "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--save", "", "--appendonly", "no",
                 "--maxmemory-policy", "noeviction", "--loglevel", "warning",
                 "--logfile", str(workdir / "redis.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.nodes[port] = Node(port, proc)
        self._wait(lambda: all(command(p, "PING").strip() == "PONG" for p in self.nodes), "the nodes")
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.nodes),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=START_DEADLINE * 2, check=False)
        if create.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {create.stdout[-500:]}{create.stderr}")
        self.wait_ok()

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_DEADLINE * 2
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis cluster: {what} did not get ready")
            if any(not n.alive for n in self.nodes.values() if n.port not in self._killed):
                raise RuntimeError("redis cluster: a node exited")
            time.sleep(0.1)

    def roles(self) -> dict[int, tuple[str, int | None]]:
        """Port → ("master", None) or ("slave", its master's port), as the live nodes see themselves."""
        roles: dict[int, tuple[str, int | None]] = {}
        for port, node in self.nodes.items():
            if not node.alive:
                continue
            info = _info(command(port, "INFO", "replication"))
            role = info.get("role", "")
            master = int(info["master_port"]) if role == "slave" and "master_port" in info else None
            roles[port] = (role, master)
        return roles

    def masters(self) -> list[int]:
        return sorted(p for p, (role, _) in self.roles().items() if role == "master")

    def replicated(self, master: int) -> None:
        """Wait until the replica of `master` has everything `master` has written so far (its replication
        offset reached the master's). `WAIT` cannot tell: it counts only the writes of the connection that
        sends it, and a `redis-cli` call is a new connection with none."""
        replica = self.replica_of(master)
        offset = int(_info(command(master, "INFO", "replication")).get("master_repl_offset", "0"))

        def caught_up() -> bool:
            seen = _info(command(replica, "INFO", "replication")).get("slave_repl_offset", "-1")
            return int(seen) >= offset

        self._wait(caught_up, f"the replication of {master}'s writes to {replica}")

    def replica_of(self, master: int) -> int:
        for port, (role, of) in self.roles().items():
            if role == "slave" and of == master:
                return port
        raise LookupError(f"no replica of {master}")

    def _healthy(self) -> bool:
        live = [n.port for n in self.nodes.values() if n.alive]
        for port in live:
            info = _info(command(port, "CLUSTER", "INFO"))
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_assigned") != "16384":
                return False
            known = [line for line in command(port, "CLUSTER", "NODES").splitlines()
                     if line and "fail" not in line.split()[2] and "noaddr" not in line.split()[2]]
            if len(known) != len(live):
                return False
        for port, (role, _) in self.roles().items():
            link = _info(command(port, "INFO", "replication")).get("master_link_status")
            if role == "slave" and link != "up":
                return False
        return len([r for r, _ in self.roles().values() if r == "master"]) == MASTERS

    def wait_ok(self) -> None:
        """Until every live node says `cluster_state:ok`, sees the others and every replica is in sync."""
        self._wait(self._healthy, "cluster_state:ok on every node")

    def master_of(self, key: str) -> int:
        """The port of the master that serves `key`'s slot now."""
        slot = int(command(self.masters()[0], "CLUSTER", "KEYSLOT", key).strip())
        return self._slot_owner(slot)

    def _slot_owner(self, slot: int) -> int:
        for port in self.masters():
            for line in command(port, "CLUSTER", "NODES").splitlines():
                fields = line.split()
                if len(fields) < 9 or "myself" not in fields[2] or "master" not in fields[2]:
                    continue
                for span in fields[8:]:
                    lo, _, hi = span.partition("-")
                    if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                        return port
        raise LookupError(f"no master serves slot {slot}")

    def kill_master(self, port: int, *, cut: float = 0.0) -> int:
        """kill -9 the master on `port`; wait until its replica took over and the cluster is ok again.
        Returns the port of the promoted replica.

        `cut` > 0: first cut the replica off its master for that many seconds, so that what the master
        runs meanwhile never reaches the replica — the unreplicated tail a failover loses, made as large as
        a replica lagging by `cut` would make it (on one host a plain kill leaves almost none: the replies
        and the replication stream leave in the same turn of the master's loop). The replica's
        `masterauth` is set to a password the master does not have, so it cannot reconnect and catch up
        before the kill; it is cleared once the replica is promoted."""
        replica = self.replica_of(port)
        if cut > 0:
            command(replica, "CONFIG", "SET", "masterauth", "cut-off")
            command(replica, "CLIENT", "KILL", "TYPE", "master")
            time.sleep(cut)
        self._killed.add(port)
        self.nodes[port].proc.send_signal(signal.SIGKILL)
        self.nodes[port].proc.wait()
        def promoted() -> bool:
            return self.roles().get(replica, ("", None))[0] == "master" and self._ok_without_replicas()

        self._wait(promoted, f"the promotion of {replica}")
        if cut > 0:
            command(replica, "CONFIG", "SET", "masterauth", "")
        return replica

    def _ok_without_replicas(self) -> bool:
        live = [n.port for n in self.nodes.values() if n.alive]
        return all(_info(command(p, "CLUSTER", "INFO")).get("cluster_state") == "ok" for p in live)

    def stop(self) -> None:
        """Every process, by pid: SIGTERM, then SIGKILL for one that does not stop."""
        for node in self.nodes.values():
            if node.alive:
                with suppress(ProcessLookupError):
                    os.kill(node.proc.pid, signal.SIGTERM)
        for node in self.nodes.values():
            reap(node.proc)


def cluster_backend(request: pytest.FixtureRequest, *, one_slot: bool = False, **kwargs: Any
                    ) -> RedisBackend:
    """For a fixture parametrized with "cluster": the backend on the session's cluster under the test's
    `cluster_prefix` (both fixtures of tests/conftest.py, started and cleaned by them). `one_slot` puts a
    hash tag in the prefix: every key of the test in one slot, for a suite that combines arbitrary keys
    in one atomic step (which a cluster runs only within a slot)."""
    cluster: Cluster = request.getfixturevalue("redis_cluster")
    prefix: str = request.getfixturevalue("cluster_prefix")
    return cluster.backend(prefix + "{one}:" if one_slot else prefix, **kwargs)


@contextmanager
def own_cluster(directory: Path) -> Iterator[Cluster]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        unavailable("redis cluster", "redis-server or redis-cli is not installed")
    cluster = Cluster(directory / "1")
    try:
        try:
            cluster.start()
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            # a port found free was taken meanwhile by another test run: once more, on other ports
            cluster.stop()
            cluster = Cluster(directory / "2")
            try:
                cluster.start()
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                unavailable("redis cluster", exc)
        yield cluster
    finally:
        cluster.stop()

"""A fixed CPU share for a benchmark's process: a cgroup of its own with a CFS quota (v2 `cpu.max`, v1
`cpu.cfs_quota_us`).

Why: on a machine of two cores shared with MariaDB and Redis, K quota-sync processes compete with each
other and with the databases for the same cores, so their sum cannot show how the sync scales. Capping
each sync at the same fraction of a core makes that cap, not the machine, the bottleneck: 1 process
moves R entries/s, and K processes, each with its own cap, K × R as long as the databases keep up (their
CPU is left uncapped and measured separately). `cpu.stat`'s throttled count shows the cap was reached.
Needs a writable cgroup file system (root, or a delegated subtree); `CpuShare.available()` says whether.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu"))  # v2 unified, then v1's cpu controller
PERIOD_US = 100_000


def _root() -> Path | None:
    """The cgroup directory a child with a CPU quota can be made in, or None."""
    for root in ROOTS:
        marker = root / ("cgroup.subtree_control" if root == ROOTS[0] else "cpu.cfs_quota_us")
        if marker.exists():
            probe = root / f"tollway-probe-{secrets.token_hex(3)}"
            try:
                probe.mkdir()
            except OSError:
                continue
            probe.rmdir()
            return root
    return None


class CpuShare:
    """One cgroup holding the processes added to it to `fraction` of one core; `close()` removes it."""

    def __init__(self, name: str, fraction: float) -> None:
        root = _root()
        if root is None:
            raise RuntimeError("no writable cgroup file system (cpu controller) for a CPU share")
        self.v2 = root == ROOTS[0]
        self.path = root / f"tollway-{name}-{secrets.token_hex(3)}"
        self.path.mkdir()
        quota = max(1000, round(fraction * PERIOD_US))
        if self.v2:
            with contextlib.suppress(OSError):  # the cpu controller, for the children of the root
                (root / "cgroup.subtree_control").write_text("+cpu")
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))

    @staticmethod
    def available() -> bool:
        return _root() is not None

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def throttled(self) -> int:
        """How many CFS periods the group was held back in (its quota used up)."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "nr_throttled":
                return int(value)
        return 0

    def close(self) -> None:
        """Remove the group (its processes must have exited)."""
        with contextlib.suppress(OSError):
            self.path.rmdir()

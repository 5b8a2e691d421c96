"""A replicated store on this machine: a valkey master, its replicas (`replicaof`) and Sentinels watching them, each
its own process with its own data folder, on loopback ports. The failover test and benchmark run it; a deployment
runs the same pieces on separate hosts (docs/operations.md, "Surviving the store's host").

Clients reach it through `url` (`redis+sentinel://...`, store.connection), never a node's own port: after the master
dies the sentinels promote a replica and the clients follow. With a password every node requires it (`requirepass`),
replicas and a promoted master's replicas send it (`masterauth`), the sentinels send it to the nodes (`auth-pass`) and
to each other (`sentinel-pass`), and require it themselves.

On stack.hosts' network-namespace hosts the same configuration applies with `host` set to each host's address: start
a node's argv (`Node.argv`) in its host's namespace instead of here; this module does not do that itself.
"""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import redis
import structlog

from openclaw_rl.ports import free_port
from stack.preflight import find_valkey_binary
from stack.process import _die_with_parent

log = structlog.get_logger(__name__)

LOOPBACK = "127.0.0.1"


def _quoted(value: str) -> str:
    """`value` as a double-quoted valkey.conf string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@dataclass
class Node:
    """One valkey process: the master, a replica, or a sentinel."""

    name: str
    kind: str
    """master, replica or sentinel (a node's role changes in a failover; its kind is what it started as)."""
    port: int
    folder: Path
    proc: subprocess.Popen | None = None

    @property
    def conf(self) -> Path:
        return self.folder / ("sentinel.conf" if self.kind == "sentinel" else "valkey.conf")

    def argv(self) -> list[str]:
        binary = str(find_valkey_binary())
        return [binary, str(self.conf), "--sentinel"] if self.kind == "sentinel" else [binary, str(self.conf)]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class ReplicatedStore:
    """`start()` brings it up and waits until the sentinels agree on the master and see each other and every replica;
    `stop()` (or leaving the `with`) stops every process still running."""

    root: Path
    password: str = ""
    master_name: str = "oc-store"
    host: str = LOOPBACK
    replicas: int = 1
    sentinels: int = 3
    quorum: int = 2
    down_after_ms: int = 1000
    """How long a master may not answer before a sentinel thinks it down (then `quorum` must agree)."""
    failover_timeout_ms: int = 3000
    """Sentinel's failover-timeout: also how long before a failed failover is tried again."""
    appendfsync: str = "everysec"
    nodes: dict[str, Node] = field(default_factory=dict)

    # ---- addresses ----
    @property
    def url(self) -> str:
        """The store's URL for clients: the sentinels and the master's name."""
        hosts = ",".join(f"{self.host}:{n.port}" for n in self._of("sentinel"))
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis+sentinel://{auth}{hosts}/{self.master_name}/0"

    def node_client(self, name: str, **options) -> redis.Redis:
        """A plain client on one node (its own port): what the test checks the data with."""
        node = self.nodes[name]
        return redis.Redis(host=self.host, port=node.port, password=self.password or None, **options)

    def node_at(self, port: int) -> Node:
        return next(n for n in self.nodes.values() if n.port == port)

    def master_port(self) -> int | None:
        """The master's port as the sentinels that answer report it (the majority of them); None if none answers."""
        votes: dict[int, int] = {}
        for node in self._of("sentinel"):
            if not node.alive:
                continue
            try:
                with self.node_client(node.name, socket_timeout=1.0, socket_connect_timeout=1.0) as s:
                    got = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
            except redis.RedisError:
                continue
            if got:
                port = int(got[1])
                votes[port] = votes.get(port, 0) + 1
        return max(votes, key=lambda p: votes[p]) if votes else None

    # ---- lifecycle ----
    def start(self, timeout_s: float = 30.0) -> ReplicatedStore:
        master = self._add("master", "master")
        for i in range(self.replicas):
            self._add(f"replica-{i + 1}", "replica")
        for i in range(self.sentinels):
            self._add(f"sentinel-{i + 1}", "sentinel")
        for node in self.nodes.values():
            node.conf.write_text(self._conf(node, master.port))
        for node in self.nodes.values():
            self._spawn(node)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        log.info("replicated store up", url_hosts=[n.port for n in self._of("sentinel")], master=master.port)
        return self

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal one node (SIGKILL: its host lost, nothing flushed) and reap it."""
        node = self.nodes[name]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(sig)
            node.proc.wait(timeout=10)

    def pause(self, name: str) -> None:
        """Stall one node (SIGSTOP): connected, answering nothing, as a replica behind a hung disk or network."""
        self.nodes[name].proc.send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.nodes[name].proc.send_signal(signal.SIGCONT)

    def restart(self, name: str, timeout_s: float = 15.0) -> None:
        """Start a stopped node again with its configuration (which the sentinels may have rewritten: a failed master
        comes back and is turned into a replica of the new one)."""
        node = self.nodes[name]
        assert not node.alive, f"{name} is running"
        self._spawn(node)
        self._wait(lambda: self._pings(node), timeout_s, f"{name} did not come back")

    def stop(self) -> None:
        for node in reversed(list(self.nodes.values())):  # the sentinels first: no failover of a store going down
            if node.proc is None or node.proc.poll() is not None:
                continue
            node.proc.terminate()
            try:
                node.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(timeout=10)

    def __enter__(self) -> ReplicatedStore:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- inside ----
    def _of(self, kind: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == kind]

    def _add(self, name: str, kind: str) -> Node:
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        node = Node(name, kind, free_port(self.host), folder)
        self.nodes[name] = node
        return node

    def _spawn(self, node: Node) -> None:
        log_file = open(node.folder / "valkey.log", "ab")  # noqa: SIM115  (the child holds it; closed below)
        try:
            node.proc = subprocess.Popen(
                node.argv(), stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        finally:
            log_file.close()

    def _conf(self, node: Node, master_port: int) -> str:
        lines = [f"port {node.port}", f"bind {self.host}", f"dir {_quoted(str(node.folder))}"]
        secret = _quoted(self.password) if self.password else None
        if node.kind == "sentinel":
            name = self.master_name
            lines += [
                f"sentinel monitor {name} {self.host} {master_port} {self.quorum}",
                f"sentinel down-after-milliseconds {name} {self.down_after_ms}",
                f"sentinel failover-timeout {name} {self.failover_timeout_ms}",
                f"sentinel parallel-syncs {name} 1",
            ]
            if secret:
                lines += [
                    f"requirepass {secret}",
                    f"sentinel auth-pass {name} {secret}",
                    f"sentinel sentinel-pass {secret}",
                ]
        else:
            lines += [
                'save ""',  # the append-only file is the persistence, as the embedded server's
                "appendonly yes",
                f"appendfsync {self.appendfsync}",
                "repl-diskless-sync yes",
                "repl-diskless-sync-delay 0",  # a replica (re)joining syncs at once, not after 5 s
            ]
            if secret:
                lines += [f"requirepass {secret}", f"masterauth {secret}"]
            if node.kind == "replica":
                lines.append(f"replicaof {self.host} {master_port}")
        return "\n".join(lines) + "\n"

    def _pings(self, node: Node) -> bool:
        try:
            with self.node_client(node.name, socket_timeout=1.0, socket_connect_timeout=1.0) as c:
                return bool(c.ping())
        except redis.RedisError:
            return False

    def _replicas_linked(self) -> bool:
        for node in self._of("replica"):
            try:
                with self.node_client(node.name, socket_timeout=1.0) as c:
                    if c.info("replication").get("master_link_status") != "up":
                        return False
            except redis.RedisError:
                return False
        return True

    def _sentinels_agree(self) -> bool:
        """Every sentinel sees the master, every replica, and every other sentinel (a failover needs a majority)."""
        for node in self._of("sentinel"):
            try:
                with self.node_client(node.name, socket_timeout=1.0) as s:
                    flat = s.execute_command("SENTINEL", "MASTER", self.master_name)
            except redis.RedisError:
                return False
            info = dict(zip(flat[::2], flat[1::2], strict=True)) if isinstance(flat, list) else flat
            info = {(k.decode() if isinstance(k, bytes) else k): v for k, v in info.items()}
            if int(info["num-slaves"]) < self.replicas or int(info["num-other-sentinels"]) < self.sentinels - 1:
                return False
        return True

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for node in self.nodes.values():
            self._wait(lambda n=node: self._pings(n), deadline - time.monotonic(), f"{node.name} did not start")
        self._wait(self._replicas_linked, deadline - time.monotonic(), "the replicas did not sync with the master")
        self._wait(self._sentinels_agree, deadline - time.monotonic(), "the sentinels did not find each other")

    def _wait(self, check, timeout_s: float, failure: str) -> None:
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while not check():
            dead = [n.name for n in self.nodes.values() if n.proc is not None and n.proc.poll() is not None]
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{failure} (logs under {self.root}; exited: {dead or 'none'})")
            time.sleep(0.1)

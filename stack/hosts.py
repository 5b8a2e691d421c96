"""Several hosts on one machine, for real: the deployment as hosts in Linux network namespaces.

Each host is a network namespace on a private bridge (its own address, its own ports, `eth0` inside), and each
command it runs starts in fresh mount and pid namespaces (`ip netns exec NS unshare -m -p -f --mount-proc`) with a
private `/tmp` and `/dev/shm` (tmpfs) and the other hosts' data directories hidden under empty read-only mounts: no
path is shared between two hosts, and a host's processes see only its own. What the hosts share is what machines
share: the code and its interpreter (an image), and the network. Services find each other by address alone, through
the same settings a compose or Kubernetes deployment sets (TEMPORAL_ADDRESS, OPENCLAW_RL_REDIS__URL,
OPENCLAW_RL_POLICY__SERVER_URLS, ...).

The layout (`Deployment`): a control host (Temporal, valkey, the sglang-router and its follower), an API host, a
workflow host (the workflow and judge pools), two env hosts, two policy hosts (an engine and a policy worker each,
behind the router) and a trainer host. `openclaw-rl bench hosts` (bench/hosts.py) drives it; so does
tests/stack/test_hosts.py. Root only (namespaces, veths, a bridge).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx
import structlog

from openclaw_rl.settings import Pool, Settings
from stack.host_images import HostImages
from stack.process import ManagedProcess, ServiceSpec, _group_members
from stack.router import ROUTER_API_KEY_ENV, RouterFront, router_argv
from stack.services import api_service, engine_services, http_ok, temporal_service, valkey_service, worker_service

log = structlog.get_logger(__name__)

REPO = Path(__file__).resolve().parents[1]
IFNAME = "eth0"
"""Each host's interface, as in a container (GLOO_SOCKET_IFNAME names it for the weight broadcast)."""
TEMPORAL_PORT, VALKEY_PORT, API_PORT, ENGINE_PORT, ROUTER_PORT, ROUTER_METRICS_PORT = (
    7233,
    6379,
    8000,
    30000,
    30100,
    30101,
)
"""Fixed ports: every host has its own network stack, as machines do."""
OWN_ENV_PREFIXES = ("OPENCLAW_RL_", "TEMPORAL_", "REDIS_URL", "GLOO_", "OTEL_")
"""The harness's own variables of these kinds never reach a host: its settings are the layout's alone."""


class HostsError(RuntimeError):
    """The hosts cannot be set up here (not root, no `ip`, namespaces refused)."""


def hosts_problem() -> str | None:
    """Why hosts cannot be made on this machine, or None."""
    if os.geteuid() != 0:
        return "several hosts need root (network namespaces, veth pairs, a bridge): run as root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (iproute2 / util-linux): apt-get install iproute2 util-linux"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()[:200]}"
    return None


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = (["ip", "netns", "exec", ns, "ip"] if ns else ["ip"]) + list(args)
    out = subprocess.run(argv, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise HostsError(f"{' '.join(argv)}: {out.stderr.strip()[:300]}")
    return out


PRIVATE_MOUNTS = (Path("/tmp"), Path("/dev/shm"))


def _image_under_private_mounts() -> list[Path]:
    """The checkout and the Python environment, where they lie under a folder each host mounts privately (a checkout
    in /tmp); outermost folders only."""
    found: list[Path] = []
    for d in sorted({REPO, Path(sys.prefix).resolve()}, key=lambda p: len(p.parts)):
        if any(d.is_relative_to(m) for m in PRIVATE_MOUNTS) and not any(d.is_relative_to(f) for f in found):
            found.append(d)
    return found


@dataclass
class Host:
    """One host: its namespace, address, data directory and the environment every command there starts with."""

    name: str
    ip: str
    data_dir: Path
    ns: str
    env: dict[str, str] = field(default_factory=dict)
    hidden: list[Path] = field(default_factory=list)
    """The other hosts' data directories, covered inside this host."""
    processes: list[ManagedProcess] = field(default_factory=list)
    images: HostImages | None = None
    """Set: the host's API and workers run from the deployment's images (stack.host_images), not the checkout."""
    contained: list[str] = field(default_factory=list)
    """The services started as containers."""

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` as a command of this host: its network, its own mounts and pids, private /tmp and /dev/shm."""
        image = _image_under_private_mounts()
        # The software (the checkout, its venv) is every host's image: one under /tmp stays visible through a
        # descriptor opened before the private /tmp covers it, bound back at the same path (not canonicalized: the
        # path now names the empty folder).
        mounts = [f"exec {3 + i}<'{d}'" for i, d in enumerate(image)]
        mounts += ["mount -t tmpfs -o mode=1777 tmpfs /tmp", "mount -t tmpfs -o mode=1777 tmpfs /dev/shm"]
        mounts += [
            f"mkdir -p '{d}' && mount --no-canonicalize --bind /proc/self/fd/{3 + i} '{d}'" for i, d in enumerate(image)
        ]
        mounts += [f"mount -t tmpfs -o ro,size=4k,mode=0 tmpfs '{p}'" for p in self.hidden]
        # sh stays pid 1 of the host's pid namespace (a pid 1 ignores SIGTERM from outside), so the service gets the
        # stop signal itself; --kill-child ends the namespace, and everything in it, if the harness dies.
        script = " && ".join(mounts) + ' && cd "$OPENCLAW_RL_HOST_CWD" && "$@"'
        return ["ip", "netns", "exec", self.ns, "unshare", "-m", "-p", "-f", "--mount-proc", "--kill-child",
                "sh", "-c", script, "sh", *argv]  # fmt: skip

    def spec(self, spec: ServiceSpec) -> ServiceSpec:
        """A service of the stack (stack.services' builders) as this host runs it: wrapped, its environment the
        host's alone."""
        return dataclasses.replace(
            spec, argv=self.wrap(spec.argv), env=self.env | spec.env, inherit_env=False, stop_timeout_s=20.0
        )

    def start(self, spec: ServiceSpec, from_image: bool = False) -> ManagedProcess:
        """Start a service of the host; `from_image` (the API, a worker pool): as a container of its role's image
        when the host runs images."""
        if from_image and self.images is not None:
            self.contained.append(spec.name)
            spec = self.images.spec(self.ns, self.data_dir, self.env, spec)
        else:
            spec = self.spec(spec)
        proc = ManagedProcess(spec, self.logs_dir)
        proc.start()
        self.processes.append(proc)
        return proc

    def run(self, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
        """A one-shot command in this host (a fresh mount namespace: its own, empty /tmp)."""
        return subprocess.run(self.wrap(argv), env=self.env, capture_output=True, text=True, timeout=timeout, cwd=REPO)

    def settings(self) -> Settings:
        """The host's settings, as its processes read them."""
        with _environ(self.env):
            return Settings()

    async def stop(self) -> None:
        if self.images is not None:  # the containers first: `run` does not outlive them, they outlive a killed `run`
            await asyncio.to_thread(self.images.stop, self.ns, self.contained, 20.0)
        for proc in reversed(self.processes):
            await stop_group(proc, proc.spec.stop_timeout_s)

    def kill(self) -> list[int]:
        """The host dies at once: SIGKILL to each of its services' process groups (the group is the service's
        `unshare`, and the namespace's pid 1 under it: when that dies, the kernel kills everything in the host's pid
        namespace, sandboxes in sessions of their own included). Returns the groups killed; never a broad kill."""
        groups = []
        for proc in self.processes:
            if proc.proc is not None and proc.proc.poll() is None:
                try:
                    os.killpg(proc.proc.pid, signal.SIGKILL)
                    groups.append(proc.proc.pid)
                except ProcessLookupError:
                    pass
        for proc in self.processes:
            if proc.proc is not None:
                try:
                    proc.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    log.warning("a killed host's process did not exit", service=proc.spec.name, pid=proc.proc.pid)
        if self.images is not None:
            self.images.kill(self.ns, self.contained)
        return groups

    def cpu_pids(self) -> list[int]:
        """The processes whose CPU (with their children's) is the host's: its services, and its containers' own."""
        own = [p.pid for p in self.processes if p.pid]
        return own + (self.images.pids(self.ns, self.contained) if self.images is not None else [])

    def pids(self) -> list[int]:
        """Every process still in this host's network namespace (`ip netns pids`): none once it is dead."""
        out = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    async def restart(self) -> None:
        """Start every service of the host again, in the order first started, and wait until each is ready (each
        incarnation's leftovers are killed first, by its own group)."""
        for proc in self.processes:
            if not proc.running():
                proc.start()
        await asyncio.gather(*(proc.wait_ready() for proc in self.processes))


async def stop_group(proc: ManagedProcess, timeout_s: float) -> None:
    """SIGTERM to the service (not to `unshare`, whose death would SIGKILL the namespace at once), then SIGKILL to
    whatever of its group is left."""
    if proc.proc is None:
        return
    pgid = proc.proc.pid
    for pid in _group_members(pgid):
        if pid != pgid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout_s
    while [p for p in _group_members(pgid) if p != pgid] and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        log.warning("a host's process did not exit", service=proc.spec.name, pid=pgid)


@contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def base_env() -> dict[str, str]:
    """What every host's processes inherit from the harness: PATH and the like, none of its stack settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(OWN_ENV_PREFIXES)}


class HostNetwork:
    """A bridge and a network namespace per host on a /24 of its own; `close()` removes all of it (also what a
    half-made set-up left)."""

    def __init__(self, root: Path, names: list[str]):
        root = Path(root).absolute()
        if root.resolve().is_relative_to("/tmp") or root.resolve().is_relative_to("/dev/shm"):
            raise HostsError(f"{root}: put the hosts' folders outside /tmp and /dev/shm (each host has its own)")
        self.root = root
        self.tag = uuid.uuid4().hex[:5]
        self.bridge = f"ocb{self.tag}"
        self.subnet = _free_subnet()
        self.gateway = f"{self.subnet}.1"
        self.hosts: dict[str, Host] = {}
        for i, name in enumerate(names):
            self.hosts[name] = Host(name, f"{self.subnet}.{10 + i}", root / name, f"oc{self.tag}-{name}")
        self._made: list[tuple[str, str]] = []
        self.links: dict[str, str] = {}
        """Each host's veth end on the bridge: setting it down cuts the host off, as a pulled cable does."""

    def cut(self, name: str) -> None:
        """Cut the host's link (its bridge-side veth down): its processes run on, unreachable and unreaching."""
        _ip("link", "set", self.links[name], "down")

    def mend(self, name: str) -> None:
        _ip("link", "set", self.links[name], "up")

    def create(self) -> HostNetwork:
        try:
            self._made.append(("link", self.bridge))
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, host in enumerate(self.hosts.values()):
                host.data_dir.mkdir(parents=True, exist_ok=True)
                os.chmod(host.data_dir, 0o700)
                outside, inside = f"v{self.tag}{i}", f"w{self.tag}{i}"
                self._made.append(("netns", host.ns))
                _ip("netns", "add", host.ns)
                self._made.append(("link", outside))
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
                self.links[host.name] = outside
                _ip("link", "set", outside, "master", self.bridge)
                _ip("link", "set", outside, "up")
                _ip("link", "set", inside, "netns", host.ns)
                _ip("link", "set", inside, "name", IFNAME, ns=host.ns)
                _ip("addr", "add", f"{host.ip}/24", "dev", IFNAME, ns=host.ns)
                _ip("link", "set", IFNAME, "up", ns=host.ns)
                _ip("link", "set", "lo", "up", ns=host.ns)
                _ip("route", "add", "default", "via", self.gateway, ns=host.ns, check=False)
            for host in self.hosts.values():
                host.hidden = [h.data_dir for h in self.hosts.values() if h is not host]
        except BaseException:
            self.close()
            raise
        (self.root / "network.json").write_text(
            json.dumps({"bridge": self.bridge, "hosts": {h.name: [h.ip, h.ns] for h in self.hosts.values()}})
        )
        return self

    def close(self) -> None:
        """Remove the namespaces and links made (a veth goes with its namespace); never fails."""
        for kind, name in reversed(self._made):
            if kind == "netns":
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)
        self._made.clear()


def _free_subnet() -> str:
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    for _ in range(200):
        candidate = f"10.231.{secrets.randbelow(250) + 1}"
        if f" {candidate}." not in used:
            return candidate
    raise HostsError("no free 10.231.x.0/24 subnet for the hosts' bridge")


# ---- the layout --------------------------------------------------------------------------------------------------

HOST_NAMES = ["control", "api", "workflow", "env-1", "env-2", "policy-1", "policy-2", "trainer"]
POLICY_HOSTS = ("policy-1", "policy-2")
ENV_HOSTS = ("env-1", "env-2")
MODEL_HOSTS = ("api", "workflow", "policy-1", "policy-2", "trainer")
"""Hosts whose processes read the model (tokenizer, or the weights themselves): each gets its own copy, as an image
carrying the model would."""
IMAGE_HOSTS = ("api", "workflow", *ENV_HOSTS, *POLICY_HOSTS, "trainer")
"""Hosts whose API or workers run from the images with `Knobs.images` (the control host's services are other
projects' images: Temporal, valkey, the router)."""


@dataclass
class Knobs:
    """What the benchmark and the test tune: training's pace and the policy's context."""

    batch_size: int = 8
    wait_s: float = 2.0
    context_length: int = 4096
    extra_env: dict[str, str] = field(default_factory=dict)
    policy_server: list[str] | None = None
    """A stand-in for the remote GPU policy servers, run on each policy host in the engine's place: its command,
    to which `--host`, `--port` and `--tokenizer` (the host's model folder) are added; it must answer /health.
    None: the embedded engine."""
    train: bool = True
    """Start the training workflow once the hosts are up."""
    images: HostImages | None = None
    """The API and the worker pools from the deployment's images (stack.host_images); None: from the checkout."""


class Deployment:
    """The hosts of a whole deployment, their settings and their services: `start()` brings it up in dependency
    order; `close()` takes it down and removes the network, whatever happened before."""

    def __init__(self, root: Path, knobs: Knobs | None = None):
        self.knobs = knobs or Knobs()
        self.net = HostNetwork(root, HOST_NAMES)
        self.hosts = self.net.hosts
        self.secrets = {
            "redis": secrets.token_hex(16),
            "engine": secrets.token_hex(16),
            "pepper": secrets.token_hex(24),
        }
        from openclaw_rl.encryption import Keyring

        self.secrets["keys"] = f"k1:{Keyring.new_key()}"
        self.router_proc: ManagedProcess | None = None
        self.front = RouterFront(self.router_url, self.secrets["engine"])
        self.down: set[str] = set()
        """Hosts killed on purpose (`kill_host`) and not yet back: `check_alive` does not count them."""

    # ---- addresses ----
    def ip(self, name: str) -> str:
        return self.hosts[name].ip

    @property
    def temporal_address(self) -> str:
        return f"{self.ip('control')}:{TEMPORAL_PORT}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.ip('control')}:{VALKEY_PORT}/0"

    @property
    def api_url(self) -> str:
        return f"http://{self.ip('api')}:{API_PORT}"

    @property
    def router_url(self) -> str:
        return f"http://{self.ip('control')}:{ROUTER_PORT}"

    @property
    def engine_urls(self) -> list[str]:
        return [f"http://{self.ip(n)}:{ENGINE_PORT}" for n in POLICY_HOSTS]

    def shared_env(self) -> dict[str, str]:
        """What every host sets alike: the addresses, the shared secrets, the learning and training settings."""
        k = self.knobs
        return {
            "TEMPORAL_ADDRESS": self.temporal_address,
            "OPENCLAW_RL_TEMPORAL__HEADLESS": "true",
            "OPENCLAW_RL_REDIS__URL": self.redis_url,
            "OPENCLAW_RL_REDIS__PASSWORD": self.secrets["redis"],
            "OPENCLAW_RL_POLICY__SERVER_URLS": json.dumps(self.engine_urls),
            "OPENCLAW_RL_POLICY__ROUTER_URL": self.router_url,
            "OPENCLAW_RL_POLICY__API_KEY": self.secrets["engine"],
            "OPENCLAW_RL_ENGINE__API_KEY": self.secrets["engine"],
            "OPENCLAW_RL_POLICY__CONTEXT_LENGTH": str(k.context_length),
            "OPENCLAW_RL_POLICY__INCREMENTAL_STREAMING": "true",
            "OPENCLAW_RL_ENCRYPTION_KEYS": self.secrets["keys"],
            "OPENCLAW_RL_API_KEY_PEPPER": self.secrets["pepper"],
            "OPENCLAW_RL_LEARNING__JUDGE": '{"type": "heuristic"}',
            "OPENCLAW_RL_TRAINING__ADAPTERS": "shared",
            "OPENCLAW_RL_TRAINING__BATCH_SIZE": str(k.batch_size),
            "OPENCLAW_RL_TRAINING__WAIT_S": str(k.wait_s),
            "OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS": "1",
            "OPENCLAW_RL_TRAINING__WEIGHT_SYNC__MODE": "distributed",
            "OPENCLAW_RL_TRAINING__WEIGHT_SYNC__BACKEND": "gloo",
            "OPENCLAW_RL_TRAINING__WEIGHT_SYNC__MASTER_ADDR": self.ip("trainer"),
            # No disk is shared: a folder path means nothing to an engine on another host (as the k8s ConfigMap).
            "OPENCLAW_RL_TRAINING__WEIGHT_SYNC__DISK_FALLBACK": "false",
            "OPENCLAW_RL_ENGINE__MAX_TOTAL_TOKENS": str(k.context_length),
            "OPENCLAW_RL_ENGINE__TORCH_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "GLOO_SOCKET_IFNAME": IFNAME,
            **k.extra_env,
        }

    def host_env(self, host: Host) -> dict[str, str]:
        env = base_env() | self.shared_env()
        env |= {
            "OPENCLAW_RL_DATA_DIR": str(host.data_dir),
            "HOME": str(host.data_dir / "home"),
            "OPENCLAW_RL_HOST_CWD": str(REPO),
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
        }
        if host.name == "control":
            # The dev server's own services reach each other on loopback (bound to the host's address alone, its
            # frontend could not reach its history service): every address of the host, which has only lo and eth0.
            env |= {"OPENCLAW_RL_TEMPORAL__BIND_HOST": "0.0.0.0", "OPENCLAW_RL_REDIS__BIND_HOST": host.ip}
        if host.name == "api":
            env |= {"OPENCLAW_RL_API__HOST": host.ip, "OPENCLAW_RL_API__PORT": str(API_PORT)}
        if host.name.startswith("policy-"):
            env |= {
                "OPENCLAW_RL_ENGINE__HOST": host.ip,
                "OPENCLAW_RL_ENGINE__PORT": str(ENGINE_PORT),
                # The router does not forward the per-request stream-mode header (as stack.services says).
                "OPENCLAW_RL_ENGINE__INCREMENTAL_STREAMING_OUTPUT": "true",
            }
        return env

    # ---- bringing it up ----
    def prepare(self, model: Path) -> None:
        """The network, each host's folders and environment, and a copy of the model where it is read."""
        self.net.create()
        for host in self.hosts.values():
            host.env = self.host_env(host)
            (host.data_dir / "home").mkdir(parents=True, exist_ok=True)
            if host.name in MODEL_HOSTS:
                target = host.data_dir / "models" / "tiny-qwen3"
                if not target.exists():
                    shutil.copytree(model, target)
            if self.knobs.images is not None and host.name in IMAGE_HOSTS:
                host.images = self.knobs.images
                host.images.own(host.data_dir)

    async def start(self, model: Path) -> None:
        from openclaw_rl.temporal_client import connect, ensure_search_attributes

        self.prepare(model)
        control, api = self.hosts["control"], self.hosts["api"]
        cs = control.settings()
        stores = [control.start(temporal_service(cs)), control.start(valkey_service(cs))]
        await asyncio.gather(*(p.wait_ready() for p in stores))
        client = await connect(cs.temporal, keyring=cs.keyring())
        await ensure_search_attributes(client, cs.temporal.namespace)
        # The router and its follower on the control host, as deploy/k8s/22-sglang-router.yaml runs them.
        front = self.front
        router = ServiceSpec(
            "router",
            router_argv(cs, host=control.ip),
            front.live,
            ready_timeout_s=60,
            env={ROUTER_API_KEY_ENV: self.secrets["engine"]},
        )
        follower = ServiceSpec("follower", [sys.executable, "-m", "stack.follow", "--interval", "1"], _no_check)
        engines = [self.hosts[name].start(self.policy_server_spec(self.hosts[name])) for name in POLICY_HOSTS]
        waiting = [control.start(router), control.start(follower)] + engines
        waiting.append(api.start(api_service(api.settings()), from_image=True))
        for name, pools in (
            ("workflow", [Pool.WORKFLOW, Pool.JUDGE]),
            *((name, [Pool.ENV]) for name in ENV_HOSTS),
            *((name, [Pool.POLICY]) for name in POLICY_HOSTS),
            ("trainer", [Pool.TRAINER]),
        ):
            for pool in pools:
                waiting.append(self.hosts[name].start(worker_service(pool), from_image=True))
        await asyncio.gather(*(p.wait_ready() for p in waiting))
        await self.wait_routed(front)
        await self.probe(client, cs)
        if self.knobs.train:
            from control.training import start_training

            await start_training(client, self.hosts["trainer"].settings())

    def policy_server_spec(self, host: Host) -> ServiceSpec:
        """What serves the policy on a policy host: the embedded engine, or the knobs' stand-in for a GPU server."""
        if self.knobs.policy_server is None:
            (spec,) = engine_services(host.settings(), None)
            return dataclasses.replace(spec, name="engine")
        argv = [*self.knobs.policy_server, "--host", host.ip, "--port", str(ENGINE_PORT)]
        argv += ["--tokenizer", str(host.data_dir / "models" / "tiny-qwen3")]
        return ServiceSpec("engine", argv, http_ok(f"http://{host.ip}:{ENGINE_PORT}/health"), ready_timeout_s=60)

    async def stop_host(self, name: str) -> None:
        """Stop a host's services gracefully (SIGTERM first), as an operator scales a pool in; `restart_host`
        brings them back."""
        self.down.add(name)
        await self.hosts[name].stop()

    async def wait_routed(self, front: RouterFront | None = None, timeout_s: float = 300.0) -> None:
        """Until the router's rotation is exactly the engines of the policy hosts that are up (both, unless one was
        stopped or killed): the follower adds a server that answers and withdraws one that does not."""
        front = front or self.front
        want = {url for name, url in zip(POLICY_HOSTS, self.engine_urls) if name not in self.down}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                healthy = {w.url for w in await front.workers() if w.is_healthy}
            except (httpx.HTTPError, RuntimeError):
                healthy = set()
            if healthy == want:
                return
            self.check_alive()
            await asyncio.sleep(0.5)
        raise HostsError(f"the router's rotation was not {sorted(want)} after {timeout_s:.0f}s")

    async def probe(self, client, settings: Settings) -> None:
        """A StackProbeWorkflow reaches every pool across the hosts (as `up` proves its stack)."""
        from contracts.health import ProbeInput
        from workflows.stack_probe import StackProbeWorkflow

        t = settings.temporal
        await client.execute_workflow(
            StackProbeWorkflow.run,
            ProbeInput(task_queues={p.value: t.task_queue(p) for p in Pool}),
            id=f"stack-probe-{uuid.uuid4().hex[:12]}",
            task_queue=t.task_queue(Pool.WORKFLOW),
            execution_timeout=timedelta(seconds=300),
        )

    # ---- failures ----
    def kill_host(self, name: str) -> dict:
        """Kill every process of a host (its own process groups, SIGKILL); what was killed and what was left."""
        host = self.hosts[name]
        self.down.add(name)
        groups = host.kill()
        # The kernel ends the rest of each pid namespace once its pid 1 is gone: give it a moment, then name (and
        # kill) whatever of the host's is still there, which should be nothing.
        deadline = time.monotonic() + 5.0
        while (left := host.pids()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.warning("host killed", host=name, groups=groups, left=left)
        return {"groups": groups, "left": left}

    async def restart_host(self, name: str) -> None:
        """Bring a killed host's services back (its data directory is as the kill left it)."""
        await self.hosts[name].restart()
        self.down.discard(name)

    def check_alive(self) -> None:
        for host in self.hosts.values():
            if host.name in self.down:
                continue
            for p in host.processes:
                if not p.running():
                    raise HostsError(f"{host.name}/{p.spec.name} exited; last lines of {p.log_path}:\n{p.tail()}")

    async def stop(self) -> None:
        # Clients first, the stores last.
        order = ["api", "workflow", "env-1", "env-2", "trainer", "policy-1", "policy-2", "control"]
        await asyncio.gather(*(self.hosts[n].stop() for n in order[:-1]))
        await self.hosts["control"].stop()

    async def close(self) -> None:
        try:
            await self.stop()
        finally:
            self.net.close()

    # ---- reading it ----
    def cpu_seconds(self) -> dict[str, float]:
        """CPU spent per host so far by its running processes and their children (Linux /proc); a container's
        process is a child of its engine's monitor, not of `run`, so it is counted by its own pid."""
        return {name: sum(_cpu(pid) for pid in host.cpu_pids()) for name, host in self.hosts.items()}

    def disk_bytes(self) -> dict[str, int]:
        return {
            name: sum(f.stat().st_size for f in host.data_dir.rglob("*") if f.is_file() and not f.is_symlink())
            for name, host in self.hosts.items()
        }


async def _no_check() -> bool:
    return True


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        own = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, IndexError, ValueError):
        return 0.0
    return own + sum(_cpu(int(c)) for c in children)

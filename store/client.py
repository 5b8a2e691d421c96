"""`Store`: one connection to the store and a repository per kind of record. Every process makes one
(`Store.from_settings`) and closes it when it stops."""

from __future__ import annotations

from dataclasses import dataclass, field

import redis.asyncio as aioredis

from openclaw_rl.encryption import Keyring
from openclaw_rl.settings import Settings
from store.adapters import AdapterRecords
from store.api_keys import ApiKeyRecords
from store.canaries import CanaryRecords
from store.chat_requests import ChatRequests
from store.connection import open_redis
from store.episodes import EpisodeData
from store.errors import Records
from store.evaluations import EvalScoreRecords
from store.idempotency import IdempotencyRecords
from store.judgements import Judgements
from store.mismatch import MismatchRecords
from store.policy import PolicyVersions
from store.prefix_links import PrefixLinks
from store.progress import ProgressRecords
from store.response_states import ResponseStates
from store.samples import ReplicaAcks, SampleStreams
from store.sealing import Sealer
from store.token_streams import TokenStreams
from store.turn_log import TurnLogArchive
from store.turns import TurnData
from store.user_data import UserRecords


@dataclass(frozen=True)
class StoreAddress:
    """Where the store is (a `redis://` or `redis+sentinel://` URL: store.connection), how long per-turn and per-step
    data is kept, and how many replicas must hold a sample before it counts as published (from `settings.redis`)."""

    url: str
    data_ttl_s: int
    acks: ReplicaAcks = field(default_factory=ReplicaAcks)


class _Server(Records):
    def __init__(self, redis: aioredis.Redis):
        self._r = redis

    async def ping(self) -> bool:
        return bool(await self._r.ping())

    async def memory_used(self) -> int:
        """Bytes the server holds (`used_memory`)."""
        return int((await self._r.info("memory"))["used_memory"])

    async def command_calls(self) -> dict[str, int]:
        """Commands the server has executed since it started, by name (`INFO commandstats`)."""
        stats = await self._r.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


class Store:
    def __init__(
        self, redis: aioredis.Redis, data_ttl_s: int, keyring: Keyring | None = None, acks: ReplicaAcks | None = None
    ):
        self._redis = redis
        sealer = Sealer(keyring)  # user content sealed with the encryption keys, when the deployment has them
        self.server = _Server(redis)
        self.api_keys = ApiKeyRecords(redis)
        self.requests = ChatRequests(redis, data_ttl_s, sealer)
        self.turns = TurnData(redis, data_ttl_s, sealer)
        self.streams = TokenStreams(redis, sealer)
        self.idempotency = IdempotencyRecords(redis, sealer=sealer)
        self.prefix_links = PrefixLinks(redis)
        self.responses = ResponseStates(redis, data_ttl_s, sealer)
        self.judgements = Judgements(redis, sealer)
        self.mismatch = MismatchRecords(redis, data_ttl_s)
        self.turn_log = TurnLogArchive(redis, data_ttl_s, sealer)
        self.episodes = EpisodeData(redis, data_ttl_s, sealer)
        self.samples = SampleStreams(redis, data_ttl_s, sealer, acks)
        self.policy = PolicyVersions(redis)
        self.adapters = AdapterRecords(redis)
        self.canaries = CanaryRecords(redis, sealer)
        self.evals = EvalScoreRecords(redis)
        self.users = UserRecords(redis, data_ttl_s, sealer)
        self.progress = ProgressRecords(redis, sealer)

    @classmethod
    def connect(cls, address: StoreAddress, keyring: Keyring | None = None, **options) -> Store:
        """Connects lazily (on the first call); `options` go to the client (e.g. socket timeouts)."""
        return cls(open_redis(address.url, **options), address.data_ttl_s, keyring, address.acks)

    @classmethod
    def from_settings(cls, settings: Settings, **options) -> Store:
        r = settings.redis
        acks = ReplicaAcks(replicas=r.min_replicas_acked, timeout_ms=r.replica_ack_timeout_ms)
        address = StoreAddress(r.target(), r.data_ttl_s, acks)
        return cls.connect(address, keyring=settings.keyring(), **options)

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

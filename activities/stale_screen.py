"""A training claim's screen for stale samples: when training lags judging, a backlog too stale to learn from goes in
one claim instead of a claim, a step, a publication and an acknowledgement per batch (4 s a batch on a loaded
2-core box; a trainer back from a crash spent minutes on that, docs/deployment.md).

Only for the shared policy: a per-user adapter's staleness counts that user's adapter steps, which only the trainer
holding it knows (the step drops those). Each drop is named on a `"dropped"` line of records/trained.jsonl before it
is acknowledged, as the step does, and remembered (by stream entry, no sample id) under the claim's key so a retried
attempt counts it again: the training workflow counts each exactly once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import structlog
from temporalio import activity

from contracts.training import STALE_DROPS_PER_CLAIM, ClaimInput
from openclaw_rl.trained_log import record_dropped
from store.samples import SampleStreams

log = structlog.get_logger(__name__)
REMEMBERED_S = 24 * 3600
"""How long a claim's drops are remembered for its retries (a claim lasts its wait plus a minute)."""


class StaleScreen:
    def __init__(
        self, samples: SampleStreams, records_dir: Path, inp: ClaimInput, claim: str, prior: set[tuple[str, str]]
    ):
        assert inp.version is not None and inp.max_staleness is not None
        self.samples, self.records_dir, self.claim = samples, records_dir, claim
        self.version, self.max_staleness = inp.version, inp.max_staleness
        self.prior = prior
        """Dropped by earlier attempts of this claim: recorded and remembered, perhaps not yet acknowledged."""
        self.new: dict[tuple[str, str], str] = {}
        """Dropped by this attempt: (source, entry id) -> sample id."""

    @classmethod
    async def for_claim(
        cls, samples: SampleStreams, records_dir: Path, inp: ClaimInput, shared: bool
    ) -> StaleScreen | None:
        """The screen this claim asks for (None: the run does not ask, or per-user adapters)."""
        if inp.version is None or inp.max_staleness is None or not shared:
            return None
        info = activity.info()
        claim = f"{info.workflow_run_id}:{info.activity_id}"
        return cls(samples, records_dir, inp, claim, await samples.claim_drops(claim))

    async def fresh(self, source: str, entry_ids: list[str]) -> list[str]:
        """The entries of `entry_ids` to train on: those not too stale (and those the screen does not judge: gone
        from the stream, or past its limit for one claim, which the step sees to)."""
        keep = []
        for eid in entry_ids:
            if (source, eid) in self.prior:
                continue
            if len(self.new) >= STALE_DROPS_PER_CLAIM:
                keep.append(eid)
                continue
            sample = await self.samples.load(source, eid)
            label = (sample.policy_version or "") if sample is not None else ""
            if sample is None or not label.isdigit() or self.version - int(label) <= self.max_staleness:
                keep.append(eid)
            else:
                self.new[(source, eid)] = sample.sample_id
            activity.heartbeat(len(keep))
        return keep

    async def settle(self) -> int:
        """Name the new drops on disk, remember them for a retry, acknowledge every drop of this claim; returns how
        many this claim dropped (earlier attempts' too)."""
        if self.new:
            by_source: dict[str, list[str]] = {}
            for src, eid in self.new:
                by_source.setdefault(src, []).append(eid)
            batch = "claim-" + hashlib.sha256(json.dumps(by_source, sort_keys=True).encode()).hexdigest()[:16]
            await asyncio.to_thread(record_dropped, self.records_dir, self.version, batch, list(self.new.values()))
            await self.samples.note_claim_drops(self.claim, set(self.new), REMEMBERED_S)
            log.info(
                "stale samples dropped at claim",
                count=len(self.new),
                version=self.version,
                max_staleness=self.max_staleness,
            )
        every = self.prior | set(self.new)
        for src in {src for src, _ in every}:
            await self.samples.acknowledge(src, [eid for s, eid in every if s == src])
        return len(every)

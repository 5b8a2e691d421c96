"""A training claim's screen for stale samples: when training lags judging, a backlog too stale to learn from goes in
one claim instead of a claim, a step, a publication and an acknowledgement per batch (4 s a batch on a loaded
2-core box; a trainer back from a crash spent minutes on that, docs/deployment.md).

Only for the shared policy: a per-user adapter's staleness counts that user's adapter steps, which only the trainer
holding it knows (the step drops those). Each drop is named on a `"dropped"` line of records/trained.jsonl before it
is acknowledged, as the step does; it is noted first (by stream entry, no sample id) under the claim's key, so a retry
of the claim names it once and counts it again, and the training workflow counts each exactly once. Attempts are
fenced: once a newer attempt of a claim starts, an older one still running (its worker cut off) notes nothing more.
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
REMEMBERED_S = 7 * 24 * 3600
"""How long a claim's drops are remembered for its retries: longer than any trainer outage a retry could follow."""


class ClaimTakenOver(RuntimeError):
    """A newer attempt of this claim runs: this one notes, names and acknowledges nothing (its result is not used)."""


class StaleScreen:
    def __init__(
        self,
        samples: SampleStreams,
        records_dir: Path,
        inp: ClaimInput,
        claim: str,
        attempt: int,
        prior: dict[tuple[str, str], str],
    ):
        assert inp.version is not None and inp.max_staleness is not None
        self.samples, self.records_dir, self.claim, self.attempt = samples, records_dir, claim, attempt
        self.version, self.max_staleness = inp.version, inp.max_staleness
        self.prior = prior
        """Noted by earlier attempts of this claim (entry -> group hash): named on disk and acknowledged, or not yet."""
        self.new: dict[tuple[str, str], str] = {}
        """Dropped by this attempt: (source, entry id) -> sample id."""

    @classmethod
    async def for_claim(
        cls, samples: SampleStreams, records_dir: Path, inp: ClaimInput, shared: bool
    ) -> StaleScreen | None:
        """The screen this claim asks for (None: the run does not ask, or per-user adapters). Fences out the claim's
        earlier attempts first, then reads what they noted: a zombie attempt can note nothing after this read."""
        if inp.version is None or inp.max_staleness is None or not shared:
            return None
        info = activity.info()
        claim = f"{info.workflow_run_id}:{info.activity_id}"
        prior = await samples.fence_claim(claim, info.attempt, REMEMBERED_S)
        return cls(samples, records_dir, inp, claim, info.attempt, prior)

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
        """Note the new drops (for a retry), name them on disk, acknowledge every drop of this claim; returns how
        many this claim dropped, earlier attempts' included. In that order, a retry after any crash names each group
        once (the line is written once per group hash) and counts it once."""
        groups: dict[str, dict[tuple[str, str], str | None]] = {}
        for entry, group in self.prior.items():
            groups.setdefault(group, {})[entry] = None
        if self.new:
            group = "claim-" + hashlib.sha256(json.dumps(sorted(self.new)).encode()).hexdigest()[:16]
            if not await self.samples.note_claim_drops(self.claim, self.attempt, group, set(self.new), REMEMBERED_S):
                raise ClaimTakenOver(f"claim {self.claim}: attempt {self.attempt} was taken over")
            groups[group] = dict(self.new)
            log.info(
                "stale samples dropped at claim",
                count=len(self.new),
                version=self.version,
                max_staleness=self.max_staleness,
            )
        for group, entries in groups.items():
            activity.heartbeat(group)
            # An earlier attempt's group still in its stream was noted but perhaps not named: named now (a group
            # already named is not named again); one gone from the stream was named before it was acknowledged.
            ids = []
            for (src, eid), sample_id in entries.items():
                if sample_id is None:
                    sample = await self.samples.load(src, eid)
                    sample_id = sample.sample_id if sample is not None else None
                if sample_id is not None:
                    ids.append(sample_id)
            if ids:
                await asyncio.to_thread(record_dropped, self.records_dir, self.version, group, ids)
        every = [entry for entries in groups.values() for entry in entries]
        for src in {src for src, _ in every}:
            await self.samples.acknowledge(src, [eid for s, eid in every if s == src])
        return len(every)

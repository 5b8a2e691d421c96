"""The right to see: everything held about one user as one document (control.user_data)."""

from __future__ import annotations

from datetime import datetime, timezone

from contracts.chat import tenant_of
from contracts.client_episodes import client_episode_id
from control.audit import SessionNotFound, list_sessions, session_turns
from control.user_data_models import (
    ExportedEpisode,
    ExportedKey,
    ExportedSample,
    ExportedStep,
    ExportedTurn,
    UserExport,
    UserNotFound,
)
from control.user_lookup import UserLookup, quote
from openclaw_rl.search_attributes import OUTCOME, SETTING, TASK_ID
from store import keys as store_keys
from store.samples import EpisodeStep, PersonalTurn


class UserExporter(UserLookup):
    # ---- see ----------------------------------------------------------------------------------------------------
    async def export(self, user_id: str) -> UserExport:
        """Everything held about `user_id`; UserNotFound when nothing is."""
        if not await self.known(user_id):
            raise UserNotFound(user_id)
        keys = await self._keys(user_id)
        out_keys = set(await self.store.users.keys_opted_out([k.key_id for k in keys]))
        groups = await self._groups(user_id)
        sessions = await list_sessions(self.client, user_id, limit=10_000)
        turns: list[ExportedTurn] = []
        seen: set[str] = set()
        for s in sessions:
            for t in await self._session_turns(user_id, s.session_id, s.workflow_id):
                seen.add(t.turn_id)
                turns.append(t)
        for turn_id in await self.store.users.turn_ids(user_id):  # turns no session lists (refused, failed)
            if turn_id not in seen:
                t = await self._fill(ExportedTurn(session_id=None, turn_id=turn_id))
                if t.request is not None or t.response is not None:
                    turns.append(t)
        incomplete: list[str] = []
        return UserExport(
            user_id=user_id,
            exported_at=datetime.now(timezone.utc),
            opted_out=await self.store.users.user_opted_out(user_id),
            api_keys=[
                ExportedKey(
                    key_id=k.key_id, created_at=k.created_at, revoked_at=k.revoked_at, opted_out=k.key_id in out_keys
                )
                for k in keys
            ],
            sessions=sessions,
            turns=turns,
            samples=await self._samples(user_id, groups, incomplete),
            episodes=await self._episodes(groups),
            adapter_versions=await self.adapters.versions(user_id),
            held_out_turns=await self.store.progress.held_out(tenant_of(user_id)),
            progress_reports=await self.store.progress.reports(tenant_of(user_id)),
            incomplete=incomplete,
        )

    async def _session_turns(self, user_id: str, session_id: str, workflow_id: str) -> list[ExportedTurn]:
        """`workflow_id`: the one listed (a session id may have an old-form workflow and a new one)."""
        out: list[ExportedTurn] = []
        offset = 0
        while True:
            try:
                log = await session_turns(self.client, self.store, user_id, session_id, offset, 500, workflow_id)
            except SessionNotFound:
                return out
            for t in log.turns:
                out.append(
                    await self._fill(
                        ExportedTurn(
                            session_id=session_id,
                            index=t.index,
                            turn_id=t.turn_id,
                            turn_type=t.turn_type,
                            status=t.status,
                            received_at=t.received_at,
                            prompt_tokens=t.prompt_tokens,
                            completion_tokens=t.completion_tokens,
                            weight_version=t.weight_version,
                            next_state_status=t.next_state_status,
                            judgement=t.judgement,
                        )
                    )
                )
            offset += 500
            if offset >= log.total:
                return out

    async def _fill(self, t: ExportedTurn) -> ExportedTurn:
        t.request = await self.store.requests.load(t.turn_id)
        t.response = await self.store.turns.response_text(t.turn_id)
        t.opted_out = await self.store.users.turn_opted_out(t.turn_id)
        if t.judgement is None:
            (t.judgement,) = await self.store.judgements.of_turns([t.turn_id])
        return t

    async def _episodes(self, groups: set[str]) -> list[ExportedEpisode]:
        """The client episodes of `groups` Temporal still has, with what the store keeps of their steps."""
        out: list[ExportedEpisode] = []
        for group in sorted(groups):
            async for wf in self.client.list_workflows(f"WorkflowId STARTS_WITH {quote(f'episode/{group}/')}"):
                index = wf.id.rsplit("/", 1)[-1]
                attrs = wf.typed_search_attributes
                opening, steps = await self.store.episodes.recorded(store_keys.episode_attempt(wf.id, 1))
                out.append(
                    ExportedEpisode(
                        id=client_episode_id(group, int(index)) if index.isdigit() else wf.id,
                        workflow_id=wf.id,
                        group_id=group,
                        setting=attrs.get(SETTING),
                        task_id=attrs.get(TASK_ID),
                        status=wf.status.name.lower() if wf.status else "unknown",
                        started_at=wf.start_time,
                        closed_at=wf.close_time,
                        outcome=attrs.get(OUTCOME),
                        opening=opening.messages if opening else None,
                        steps=[
                            ExportedStep(
                                index=t,
                                action=act.message if act else None,
                                observation=obs.messages if obs else None,
                                parse_error=act.action.parse_error if act else None,
                            )
                            for t, (act, obs) in steps.items()
                        ],
                    )
                )
        return sorted(out, key=lambda e: (e.started_at or datetime.min.replace(tzinfo=timezone.utc), e.id))

    async def _samples(self, user_id: str, groups: set[str], incomplete: list[str]) -> list[ExportedSample]:
        out: list[ExportedSample] = []
        for source in await self.store.samples.sources():
            for entry_id, s in await self.store.samples.entries(source):
                p = s.provenance
                common = dict(
                    sample_id=s.sample_id,
                    source=source,
                    entry_id=entry_id,
                    policy_version=s.policy_version,
                    reward=s.reward,
                    loss_mask=s.loss_mask,
                    tokens=len(s.response_ids),
                )
                if isinstance(p, EpisodeStep) and p.group_id in groups:
                    out.append(ExportedSample(**common, episode_id=p.episode_id, step=p.step))
                elif isinstance(p, PersonalTurn) and p.user_id == user_id:
                    out.append(
                        ExportedSample(
                            **common,
                            session_id=p.session_id,
                            turn_id=p.turn_id,
                            turn_index=p.turn_index,
                            reason=p.reason,
                        )
                    )
        files = await self.files.export(user_id, groups)  # records/trained.jsonl lives on the trainer's host
        if files is None:
            incomplete.append(
                "the trainer pool did not answer: samples trained into a version (records/trained.jsonl) and adapter "
                "versions are not listed"
            )
            return out
        waiting = {s.sample_id: s for s in out}
        for t in files.trained:
            if t.sample_id in waiting:
                waiting[t.sample_id].trained_into = t.versions
            else:
                out.append(ExportedSample(sample_id=t.sample_id, source="", trained_into=t.versions))
        return out

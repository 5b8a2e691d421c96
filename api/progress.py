"""Did it get better for me? A user's progress report, through their own key (contracts.progress; docs/evaluation.md):

- `GET /v1/me/progress`: the latest report (the version serving them against their first and previous versions,
  on their own held-out turns: pairwise win rates with 95% intervals, and the turns that changed most), the
  history of earlier reports' headline figures, and whether one is being computed;
- `POST /v1/me/progress`: compute one now (202; the GET shows it once done). A report already running is joined.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from api.auth import Caller, authenticate
from api.openapi_spec import USER_DATA_ERRORS
from contracts.chat import tenant_of
from contracts.progress import ProgressReport, report_workflow_id
from control.progress import start_report

router = APIRouter()


class ReportPoint(BaseModel):
    """One earlier report's headline: the serving version then, and its win rate against the first version."""

    served_version: str
    at: float
    judged: int
    win_rate_vs_first: float | None = None
    low: float | None = None
    high: float | None = None


class ProgressView(BaseModel):
    held_out_share: float
    """The share of judged turns kept aside from training for these reports (0: reports are off)."""
    held_out_turns: int
    """The user's turns held out so far."""
    latest: ProgressReport | None = None
    history: list[ReportPoint] = Field(default_factory=list)
    """Earlier reports, newest first (the latest included)."""
    note: str | None = None
    """Why there is no report yet, when there is none."""


class ReportStarted(BaseModel):
    workflow_id: str
    """The ProgressReportWorkflow computing it (visible in the Temporal UI)."""
    status: str = "running"


def point(report: ProgressReport) -> ReportPoint:
    first = next((c for c in report.comparisons if c.against == "first"), None)
    return ReportPoint(
        served_version=report.served_version,
        at=report.at,
        judged=report.judged,
        win_rate_vs_first=first.win_rate if first else None,
        low=first.low if first else None,
        high=first.high if first else None,
    )


@router.get("/v1/me/progress", responses=USER_DATA_ERRORS)
async def my_progress(request: Request, caller: Caller = Depends(authenticate)) -> ProgressView:
    """The key's user's latest progress report and the history of earlier ones."""
    settings, store = request.app.state.settings, request.app.state.store
    tenant = tenant_of(caller.user_id)
    reports = await store.progress.reports(tenant)
    share = settings.eval.progress.held_out_share
    held = await store.progress.held_out_count(tenant)
    note = None
    if not reports:
        note = (
            "reports are off: the deployment holds no turns out of training (eval.progress.held_out_share is 0)"
            if share <= 0
            else f"no report yet ({held} turns held out so far): POST /v1/me/progress computes one"
        )
    return ProgressView(
        held_out_share=share,
        held_out_turns=held,
        latest=reports[0] if reports else None,
        history=[point(r) for r in reports],
        note=note,
    )


@router.post("/v1/me/progress", status_code=202, responses=USER_DATA_ERRORS)
async def compute_progress(request: Request, caller: Caller = Depends(authenticate)) -> ReportStarted:
    """Compute the key's user's progress report now (the GET shows it once done)."""
    client = await request.app.state.gateway.client()
    await start_report(client, request.app.state.settings, caller.user_id)
    return ReportStarted(workflow_id=report_workflow_id(tenant_of(caller.user_id)))

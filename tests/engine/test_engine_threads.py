"""On a CPU the engine decodes a lone row on one torch thread (a second one only spins) and uses them all for
several rows or a prefill. Thread counts are read on the engine thread, never timed."""

from __future__ import annotations

import torch

from engine.model_runner import WorkItem
from engine.scheduler import Scheduler
from policy_client.wire import SamplingParams


def req(ids: list[int], n: int, on_progress=None) -> WorkItem:
    params = SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True)
    return WorkItem(input_ids=list(ids), params=params, on_progress=on_progress)


async def _threads_seen(lm, adaptive: bool) -> tuple[list[int], list[int], list]:
    """Thread counts while one request decodes alone, then while three decode together; and the answers."""
    sched = Scheduler(lm, max_batch_size=4, batch_window_ms=0, one_thread_for_one_row=adaptive)
    sched.start()
    try:
        alone: list[int] = []
        together: list[int] = []
        first = await sched.submit([req([300, 301, 302], 6, lambda _: alone.append(torch.get_num_threads()))])
        rows = [req([400 + i, 7, 8], 6, lambda _: together.append(torch.get_num_threads())) for i in range(3)]
        many = await sched.submit(rows)
        return alone, together, first + many
    finally:
        sched.stop()


async def test_one_row_decodes_on_one_thread_and_several_on_all(lm):
    before = torch.get_num_threads()
    full = 2  # whatever the machine has: the switch is what is checked
    torch.set_num_threads(full)
    try:
        alone, together, answers = await _threads_seen(lm, adaptive=True)
        fixed_alone, fixed_together, fixed_answers = await _threads_seen(lm, adaptive=False)
    finally:
        torch.set_num_threads(before)
    assert set(alone) == {1}
    # Three rows admitted at once decode together on every thread (their last steps may be down to one row).
    assert together[0] == full and together.count(full) >= 3, together
    assert set(fixed_alone) == set(fixed_together) == {full}
    assert [a.output_ids for a in answers] == [a.output_ids for a in fixed_answers]

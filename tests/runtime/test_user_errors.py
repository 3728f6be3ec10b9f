"""A user's error before the first iteration fails the job at once, on a real local Ray
(issue 30 item 6): FAILED on its first attempt with the error as the reason, never PREEMPTED
"will be re-admitted" nor RETRYING, one failure counted, and the failure's report carries the
worker's traceback and the tail of what each rank printed, for the job's log."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw.model.executor_events import Failed
from jigsaw.model.lifecycle import JobState
from tests.runtime.faulty import SHARDS_MISSING
from tests.runtime.support import make_harness

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]


def test_a_builder_that_raises_fails_the_job_once_with_its_traceback_and_output(
    tmp_path: Path,
) -> None:
    h = make_harness(tmp_path)
    try:
        h.submit("signature", model="tests.runtime.faulty:needs_a_width", workers=2, iterations=20)
        h.submit("data", model="tests.runtime.faulty:prints_then_raises", workers=1, iterations=20)
        h.run_until(h.all_terminal, timeout_s=120)
        signature, data = h.store.get("signature"), h.store.get("data")
        assert "building model 'tests.runtime.faulty:needs_a_width' raised TypeError" in (
            signature.reason
        ), signature.reason
        assert "missing 1 required positional argument: 'width'" in signature.reason
        assert f"raised FileNotFoundError: {SHARDS_MISSING}" in data.reason, data.reason
        for job in (signature, data):
            assert (job.state, job.attempt, job.failures) == (JobState.FAILED, 1, 1)
            states = [event.to_state for event in h.store.events(job.id)]
            assert states == [
                JobState.PENDING,
                JobState.ADMITTED,
                JobState.FAILED,
            ], states
        failed = {e.job_id: e for e in h.events if isinstance(e, Failed)}
        assert not failed["data"].retryable
        detail = failed["data"].detail
        assert detail[0] == "worker traceback:", detail
        assert any("ray::GangWorker.setup()" in line for line in detail), detail
        assert any("in prints_then_raises" in line for line in detail), detail
        assert not any("\x1b" in line or not line.strip(" ^") for line in detail), detail
        assert "rank 0 stdout (last 1 lines):" in detail
        assert "  loading shards from /data/digits-shards" in detail
        assert "  warning: shard index is stale" in detail
        assert any("needs_a_width" in line for line in failed["signature"].detail)
    finally:
        h.executor.shutdown()

"""jigsaw packs a one-worker job into a running gang's SPB slack on a real local Ray: the
guest's actor gets a fractional GPU on the host's GPU, the host switches plan in place (no
restart), both train to success, and the host goes back to full backprop afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw.model.executor_events import Finished, Started
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from tests.runtime.support import make_harness

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("local_ray")]


@pytest.mark.xfail(
    strict=True,
    reason="the joint allocator offers no slot on a digits_cnn gang (a partial worker keeps "
    "~99% of its GPU busy, below the allocator's minimum slack); a CPU-fast zoo model with real "
    "slack is needed to show the Ray-side pack again (issue 29, left open)",
)
def test_a_guest_runs_on_the_host_gpu_and_both_succeed(tmp_path: Path) -> None:
    # digits_cnn is so small that the oracle sees almost no slack in an SPB plan (a partial
    # worker keeps 99% of its GPU busy): with eta = 1 (the policy's eta_of seam) and a
    # restart priced at an hour (so preempting the host never pays), the switch is taken.
    oracle = Oracle(preset("v100"))
    policy = JigsawPolicy(
        oracle,
        Planner(oracle.hardware, catalog=ModelCatalog(oracle.profiles)),
        config=JigsawConfig(restart_s=3600.0),
        eta_of=lambda model, plan: 1.0,
    )
    h = make_harness(tmp_path, gpus=2, policy=policy)
    try:
        # 300 iterations: the guest (60) finishes while the host is still below ~100.
        h.submit("host", workers=2, iterations=300, batch_size=32, spb="auto")
        h.run_until(lambda: h.store.get("host").state.holds_resources, timeout_s=60)
        h.submit("guest", workers=1, iterations=60, batch_size=32, spb="auto")
        h.run_until(lambda: h.store.get("guest").state.holds_resources, timeout_s=60)
        host, guest = h.store.get("host"), h.store.get("guest")
        assert host.state.holds_resources, (host.state, host.reason, h.events)
        assert guest.placement[0] in host.placement[1:]  # on the partial worker's GPU
        assert isinstance(host.plan, SPBPlan) and not host.plan.is_full_backprop
        h.run_until(h.all_terminal, timeout_s=300)
        for name in ("host", "guest"):
            job = h.store.get(name)
            assert job.state == JobState.SUCCEEDED, (name, job.reason)
            assert job.iterations_done == job.spec.iterations
        # The host was never restarted: one start, one attempt.
        assert sum(1 for e in h.events if isinstance(e, Started) and e.job_id == "host") == 1
        finished = {e.job_id: e for e in h.events if isinstance(e, Finished)}
        assert finished["guest"].metrics["accuracy"] > 0.5
        assert finished["host"].metrics["accuracy"] > 0.5
    finally:
        h.executor.shutdown()

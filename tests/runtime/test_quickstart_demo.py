"""`make run`'s script end to end on a real local Ray: the guest is packed into the host's SPB
slack, `jigsaw-cli cluster` shows the shared GPU, and both jobs finish with a held-out accuracy
(scripts/quickstart.sh; docs/SCHEDULER.md, "The `make run` demo"). Its elastic act is issue 23's
end-to-end elastic test: grown, shrunk for a newcomer, grown back, both jobs SUCCEEDED."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port, processes_in_session

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.integration]


def test_make_run_packs_the_guest_and_prints_both_accuracies(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("JIGSAW_")}
    env.update(
        {
            "VENV": str(Path(sys.executable).parent.parent),
            "PYTHONPATH": str(REPO),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "JIGSAW_DATA_DIR": str(tmp_path / "data"),
            "JIGSAW_PORT": str(free_port()),
        }
    )
    result = subprocess.Popen(
        [str(REPO / "scripts" / "quickstart.sh")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    out, _ = result.communicate(timeout=900)  # with stderr, where `status --watch` writes
    leftover = processes_in_session(result.pid)
    deadline = time.monotonic() + 10  # Ray's idle workers take a few seconds to go
    while leftover and time.monotonic() < deadline:
        time.sleep(0.5)
        leftover = processes_in_session(result.pid)
    for line in leftover:  # never leave them running, even when the test fails
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert leftover == [], leftover  # Ray's agents used to outlive the demo
    assert result.returncode == 0, out[-4000:]
    assert "one GPU runs the host's partial worker and the guest" in out, out
    # The host's SPB plan is a near tie between staircase and uniform:1 (docs/SCHEDULER.md);
    # either one opens the slack the guest packs into.
    packed = r"\(mlp-guest\): .*packed into j-\w+'s slack \(plan (staircase|uniform:1)\)"
    assert re.search(packed, out), out
    shared = [line for line in out.splitlines() if "◆ shared" in line]
    assert len(shared) == 1, out
    assert "digits-host/r" in shared[0] and "mlp-guest/r0" in shared[0]
    accuracies = {
        name: json.loads(metrics)["accuracy"]
        for name, metrics in re.findall(
            r"^(digits-host|mlp-guest|mlp-elastic|mlp-newcomer): .*finished at .*?(\{.*\})$",
            out,
            flags=re.MULTILINE,
        )
    }
    assert set(accuracies) == {"digits-host", "mlp-guest", "mlp-elastic", "mlp-newcomer"}, out
    assert all(accuracy > 0.9 for accuracy in accuracies.values()), accuracies
    assert_the_elastic_act(out)


def assert_the_elastic_act(out: str) -> None:
    """Issue 23's "done means": an elastic job submitted with ``jigsaw-cli submit`` on local
    Ray grows into the idle GPUs (its fixed global batch split four ways), shrinks to
    ``min_workers`` for the newcomer, which it names, grows back, and reaches SUCCEEDED with
    every iteration done; each resize is an event with its reason."""
    act = out[out.index("==> elastic:") :]
    assert "Size       4 workers x 12 = global batch 48; elastic 1..4 workers, batch fixed" in act
    newcomer = re.search(r"(j-\w+) \(mlp-newcomer\)", act)
    assert newcomer, act
    resizes = act[act.index("==> the elastic job's resizes") : act.index("==> final evaluation")]
    reasons = [line for line in resizes.splitlines() if "Running/Resized" in line]
    assert "2 -> 4 workers into GPUs nobody waits for" in reasons[0], resizes
    shrink = f"4 -> 1 workers 1 job(s) wait, {newcomer.group(1)} first: back to min_workers"
    assert any(shrink in line for line in reasons), resizes
    assert len(reasons) >= 3 and "into GPUs nobody waits for" in reasons[-1], resizes
    final = act[act.rindex("==> final state") : act.index("==> the elastic job's resizes")]
    jobs = final.split("\nID ")
    assert len(jobs) == 3, final  # the text before the first job, then one block per job
    for block in jobs[1:]:
        assert re.search(r"^State +SUCCEEDED", block, flags=re.MULTILINE), block
    assert re.search(r"^Progress +100\.0% +3000/3000$", jobs[1], flags=re.MULTILINE), jobs[1]
    assert re.search(r"^mlp-elastic: .*finished at 3000/3000 ", act, flags=re.MULTILINE), act

"""`make run`'s script end to end on a real local Ray: the guest is packed into the host's SPB
slack, `jigsaw-cli cluster` shows the shared GPU, and both jobs finish with a held-out accuracy
(scripts/quickstart.sh; docs/SCHEDULER.md, "The `make run` demo")."""

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
    # The elastic act: grown into the idle GPUs, shrunk for the newcomer (named), grown back.
    assert re.search(r"2 -> 4 workers into GPUs nobody waits for", out), out
    assert re.search(r"4 -> 1 workers 1 job\(s\) wait, j-\w+ first: back to min_workers", out), out
    assert all(accuracy > 0.9 for accuracy in accuracies.values()), accuracies

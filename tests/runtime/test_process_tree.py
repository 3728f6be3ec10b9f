"""What ``serve`` uses to stop the processes Ray leaves behind (worker/runtime/process_tree.py):
a grandchild that ignores SIGTERM and was re-parented to init once its parent died is still
found by what was recorded, and stopped; a process that was not recorded is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from worker.runtime import process_tree

STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_recorded_grandchild_that_ignores_sigterm_is_stopped_after_its_parent_died() -> None:
    parent = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        time.sleep(0.3)  # let the grandchild install its SIG_IGN
        recorded = [p for p in process_tree.descendants(os.getpid()) if p[0] != bystander.pid]
        assert {parent.pid, grandchild} <= {pid for pid, _ in recorded}
        parent.kill()
        parent.wait()  # the grandchild is init's now, no longer our descendant
        assert grandchild not in {pid for pid, _ in process_tree.descendants(os.getpid())}
        stopped = process_tree.stop(recorded, grace_s=0.5)
        assert [pid for pid, _ in stopped] == [grandchild]
        assert process_tree.alive(recorded) == []
        assert bystander.poll() is None
    finally:
        for process in (parent, bystander):
            process.kill()
            process.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        try:
            os.kill(grandchild, signal.SIGKILL)
        except (ProcessLookupError, NameError):
            pass

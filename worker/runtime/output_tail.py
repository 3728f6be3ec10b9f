"""The last lines a worker process wrote to its stdout and stderr, for the job's log when its
gang fails (what ``ray job logs`` would show).

Ray points a worker's file descriptors 1 and 2 at files in its session's log directory; they
are read back through ``/proc/self/fd`` (Linux). Where they are not regular files (a terminal,
a pipe, another OS) there is nothing to read and the tail is empty.
"""

from __future__ import annotations

import os
import stat
import sys

TAIL_BYTES = 64 * 1024
RAY_MARKERS = (":actor_name:", ":task_name:", ":job_id:")
"""Lines Ray writes into a worker's files to label them, not the worker's own output."""


def output_tail(lines: int) -> dict[str, list[str]]:
    """``{"stdout": [...], "stderr": [...]}``: the last ``lines`` lines of each stream that is
    a regular file, oldest first; a stream with nothing to show is left out."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    tails: dict[str, list[str]] = {}
    for fd, name in ((1, "stdout"), (2, "stderr")):
        tail = _file_tail(fd, lines)
        if tail:
            tails[name] = tail
    return tails


def _file_tail(fd: int, lines: int) -> list[str]:
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        with open(f"/proc/self/fd/{fd}", "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - TAIL_BYTES, 0))
            text = handle.read().decode(errors="replace")
    except OSError:
        return []
    read = text.splitlines()
    if size > TAIL_BYTES:
        read = read[1:]  # the first line read may be the end of a longer one
    kept = [line for line in read if line.strip() and not line.startswith(RAY_MARKERS)]
    return kept[-lines:]

"""Where a job's checkpoints live and which one a restart restores.

Layout under ``JIGSAW_CHECKPOINT_DIR``::

    <root>/<job id>/it-000000150/   one SPB engine checkpoint (see worker/spb/checkpoint.py)
    <root>/<job id>/it-000000200/

A checkpoint counts only once its ``meta.json`` commit marker exists (the engine writes it
last, after a barrier), so a gang killed mid-save leaves a directory that is ignored and later
pruned. On a multi-node cluster the root must be shared storage: a resumed gang may run on
other nodes than the one that saved.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from worker.spb.checkpoint import META_FILE

PREFIX = "it-"


class CheckpointStore:
    def __init__(self, root: Path | str, job_id: str) -> None:
        self.directory = Path(root) / job_id

    def path_for(self, iteration: int) -> Path:
        return self.directory / f"{PREFIX}{iteration:09d}"

    def complete(self) -> list[tuple[int, Path]]:
        """(iteration, path) of every committed checkpoint, oldest first."""
        if not self.directory.is_dir():
            return []
        found: list[tuple[int, Path]] = []
        for child in self.directory.iterdir():
            if child.name.startswith(PREFIX) and (child / META_FILE).is_file():
                try:
                    found.append((int(child.name[len(PREFIX) :]), child))
                except ValueError:
                    continue
        return sorted(found)

    def latest(self) -> tuple[int, Path] | None:
        found = self.complete()
        return found[-1] if found else None

    def prune(self, keep: int) -> None:
        """Keep the ``keep`` newest committed checkpoints; drop older and torn ones."""
        found = self.complete()
        kept = {path for _, path in found[-keep:]}
        newest = found[-1][0] if found else -1
        if not self.directory.is_dir():
            return
        for child in self.directory.iterdir():
            if not child.name.startswith(PREFIX) or child in kept:
                continue
            committed = (child / META_FILE).is_file()
            try:
                iteration = int(child.name[len(PREFIX) :])
            except ValueError:
                continue
            # An uncommitted directory newer than the newest commit may be a save in progress.
            if committed or iteration < newest:
                shutil.rmtree(child, ignore_errors=True)

    def remove_all(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def checkpointed_jobs(root: Path | str) -> set[str]:
    """Ids of the jobs with a directory under ``root`` (committed checkpoints or not)."""
    base = Path(root)
    if not base.is_dir():
        return set()
    return {child.name for child in base.iterdir() if child.is_dir()}

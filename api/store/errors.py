"""Store errors beyond the core's (the core's ConflictError is the base of these)."""

from __future__ import annotations

from jigsaw.model.errors import ConflictError


class StaleEpochError(ConflictError):
    """A scheduler whose leadership epoch has passed tried to write: it is no longer leader."""

    def __init__(self, epoch: int, current: int | None) -> None:
        super().__init__(
            f"write refused: scheduler epoch {epoch} is stale (the leader's epoch is {current})"
        )
        self.epoch = epoch
        self.current = current

"""The model catalog: one answer, for every part of JigSaw, to "what is this model?".

A job names its model in one of two ways:

- a **catalog model**: a zoo model the workers can build (``digits_cnn``, ``resnet18_32``, ...)
  or a trace alias (a Pollux application or Gavel job type, simulation only). The catalog knows
  its block count K and its profile (measured or analytic, :mod:`jigsaw.model.profiles`).
- an **entrypoint**, ``package.module:function``, a user's own model. The catalog knows only
  that the name is well formed; its K is reported by the workers at the job's first lease and
  kept on the job (:attr:`jigsaw.model.domain.Job.model_blocks`).

The oracle, the API, the CLI and the policies ask the catalog; the worker checks the model it
built against it at launch. Nothing else guesses a block count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.profiles import ZOO_MODELS, ModelProfile
from jigsaw.oracle.profile_catalog import ProfileCatalog

ENTRYPOINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*", re.ASCII)
"""``package.module:function`` with identifier parts only."""

MAX_MODEL_NAME = 256


class ModelKind(StrEnum):
    ZOO = "zoo"
    """Built by the workers from the zoo; profiled."""
    TRACE = "trace alias"
    """A Pollux application or Gavel job type: profiled for simulation, not trainable."""
    ENTRYPOINT = "entrypoint"
    """A user's ``package.module:function``: no profile; K reported at the first lease."""


@dataclass(frozen=True, slots=True)
class ModelEntry:
    name: str
    kind: ModelKind
    profile: ModelProfile | None

    @property
    def num_blocks(self) -> int | None:
        """K, or ``None`` for an entrypoint (known only once a worker built it)."""
        return self.profile.num_blocks if self.profile is not None else None


def is_entrypoint(name: str) -> bool:
    return ENTRYPOINT.fullmatch(name) is not None


class ModelCatalog:
    """Models by name. Cached; one per process is enough (:func:`default_catalog`)."""

    def __init__(self, profiles: ProfileCatalog | None = None) -> None:
        self.profiles = profiles if profiles is not None else ProfileCatalog()
        self._entries: dict[str, ModelEntry | None] = {}

    def find(self, name: str) -> ModelEntry | None:
        """The entry, or ``None`` for a name that is neither a known model nor an entrypoint."""
        if name in self._entries:
            return self._entries[name]
        entry = self._build(name)
        if len(self._entries) > 10_000:  # model names come from users: keep it bounded
            self._entries.clear()
        self._entries[name] = entry
        return entry

    def lookup(self, name: str) -> ModelEntry:
        """The entry; a clear :class:`InvalidSpecError` on ``model`` when there is none."""
        entry = self.find(name)
        if entry is None:
            raise InvalidSpecError(
                f"unknown model {_shorten(name)!r}: use a zoo model "
                f"({', '.join(ZOO_MODELS)}) or your own as package.module:function",
                field="model",
            )
        return entry

    def num_blocks(self, name: str) -> int | None:
        entry = self.find(name)
        return entry.num_blocks if entry is not None else None

    def has_profile(self, name: str) -> bool:
        entry = self.find(name)
        return entry is not None and entry.profile is not None

    def _build(self, name: str) -> ModelEntry | None:
        if not name or len(name) > MAX_MODEL_NAME:
            return None
        if is_entrypoint(name):
            return ModelEntry(name, ModelKind.ENTRYPOINT, None)
        try:
            profile = self.profiles.get(name)
        except (InvalidSpecError, OSError):
            return None
        kind = ModelKind.ZOO if name in ZOO_MODELS else ModelKind.TRACE
        return ModelEntry(name, kind, profile)


def _shorten(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


_DEFAULT: ModelCatalog | None = None


def default_catalog() -> ModelCatalog:
    """The process-wide catalog over the shipped profiles."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = ModelCatalog()
    return _DEFAULT

"""Ranks as threads of one process: a fast, exact stand-in for a process group.

Used to simulate an N-worker data-parallel job in one process (the statistical-efficiency
runs): every thread runs an unmodified :class:`~worker.spb.trainer.SPBTrainer`, and this
backend performs the same reductions and deliveries the torch.distributed backend does, with
the same byte accounting. The only numerical difference is the summation order of all-reduce
(here: rank order), which changes results in the last bits, not in expectation;
``tests/worker/test_spb_equivalence.py`` compares both backends step by step.

Models must not draw from torch's global RNG during training (e.g. dropout), because threads
share it; the zoo's small models do not.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from worker.spb.collectives import (
    CollectiveError,
    DoneWork,
    TrafficCounter,
    Work,
    ring_all_reduce_bytes,
)

DEFAULT_TIMEOUT_S = 300.0


@dataclass
class _Slot:
    expected: int
    posted: dict[int, torch.Tensor] = field(default_factory=dict)
    readers_left: int = 0


class ThreadGroup:
    """Shared rendezvous for ``world_size`` thread ranks."""

    def __init__(self, world_size: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.world_size = world_size
        self.timeout_s = timeout_s
        self._cond = threading.Condition()
        self._slots: dict[tuple[Any, ...], _Slot] = {}
        self._barrier = threading.Barrier(world_size, timeout=timeout_s)
        self._failure: BaseException | None = None

    def collectives(self, rank: int) -> ThreadCollectives:
        return ThreadCollectives(self, rank)

    def abort(self, error: BaseException) -> None:
        """Wake every waiting rank with an error (a peer thread failed)."""
        with self._cond:
            self._failure = error
            self._cond.notify_all()
        self._barrier.abort()

    def _post(self, key: tuple[Any, ...], rank: int, tensor: torch.Tensor, expected: int) -> None:
        with self._cond:
            slot = self._slots.setdefault(key, _Slot(expected, readers_left=expected))
            slot.posted[rank] = tensor
            self._cond.notify_all()

    def _await(self, key: tuple[Any, ...], expected: int) -> _Slot:
        def ready() -> bool:
            slot = self._slots.get(key)
            return self._failure is not None or (slot is not None and len(slot.posted) >= expected)

        with self._cond:
            if not self._cond.wait_for(ready, timeout=self.timeout_s):
                raise CollectiveError(f"thread collective {key} timed out after {self.timeout_s}s")
            if self._failure is not None:
                raise CollectiveError(f"a peer rank failed: {self._failure!r}")
            return self._slots[key]

    def _release(self, key: tuple[Any, ...]) -> None:
        with self._cond:
            slot = self._slots[key]
            slot.readers_left -= 1
            if slot.readers_left == 0:
                del self._slots[key]

    def barrier(self) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError as exc:
            raise CollectiveError(f"barrier broken: {self._failure!r}") from exc


class _ThreadWork:
    def __init__(self, finish: Callable[[], None]) -> None:
        self._finish: Callable[[], None] | None = finish

    def wait(self) -> None:
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()


class ThreadCollectives:
    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self.group = group
        self.rank = rank
        self.world_size = group.world_size
        self.device = torch.device("cpu")
        self.backend = "threads"
        self.traffic = TrafficCounter()
        self._sequence: dict[tuple[Any, ...], int] = defaultdict(int)

    def _next_key(self, *parts: Any) -> tuple[Any, ...]:
        # The k-th operation on the same group/pair matches the k-th on every peer, exactly as
        # torch.distributed matches collectives by issue order.
        number = self._sequence[parts]
        self._sequence[parts] = number + 1
        return (*parts, number)

    def prepare_groups(self, groups: Sequence[tuple[int, ...]]) -> None:
        del groups  # thread groups need no setup

    def all_reduce_sum(self, tensor: torch.Tensor, ranks: tuple[int, ...]) -> Work:
        if len(ranks) < 2:
            return DoneWork()
        members = tuple(sorted(ranks))
        self.traffic.add(
            ring_all_reduce_bytes(tensor.numel() * tensor.element_size(), len(members))
        )
        key = self._next_key("all_reduce", members)
        # Post a snapshot: the caller may overwrite ``tensor`` while peers are still reading.
        self.group._post(key, self.rank, tensor.detach().clone(), len(members))

        def finish() -> None:
            slot = self.group._await(key, len(members))
            total = slot.posted[members[0]].clone()
            for member in members[1:]:
                total.add_(slot.posted[member])
            tensor.copy_(total)
            self.group._release(key)

        return _ThreadWork(finish)

    def send(self, tensor: torch.Tensor, dst: int, tag: int) -> Work:
        self.traffic.add(tensor.numel() * tensor.element_size())
        key = self._next_key("p2p", self.rank, dst, tag)
        self.group._post(key, self.rank, tensor.detach().clone(), 1)
        return DoneWork()

    def recv(self, tensor: torch.Tensor, src: int, tag: int) -> Work:
        key = self._next_key("p2p", src, self.rank, tag)

        def finish() -> None:
            slot = self.group._await(key, 1)
            tensor.copy_(slot.posted[src])
            self.group._release(key)

        return _ThreadWork(finish)

    def barrier(self) -> None:
        self.group.barrier()


def run_threads(world_size: int, body: Callable[[int, ThreadCollectives], Any]) -> list[Any]:
    """Run ``body(rank, collectives)`` on ``world_size`` threads; return results by rank.
    The first failure aborts the group and is re-raised here."""
    group = ThreadGroup(world_size)
    results: list[Any] = [None] * world_size
    errors: list[BaseException] = []

    def target(rank: int) -> None:
        try:
            results[rank] = body(rank, group.collectives(rank))
        except BaseException as exc:
            errors.append(exc)
            group.abort(exc)

    threads = [
        threading.Thread(target=target, args=(r,), name=f"spb-rank{r}") for r in range(world_size)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        first = next((e for e in errors if not isinstance(e, CollectiveError)), errors[0])
        raise first
    return results

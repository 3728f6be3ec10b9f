"""torch.distributed implementation of :class:`worker.spb.collectives.Collectives`."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import torch
import torch.distributed as dist

from worker.spb.collectives import (
    CollectiveError,
    DoneWork,
    TrafficCounter,
    Work,
    ring_all_reduce_bytes,
)

AUTO_BACKEND = "auto"


def pick_backend(device: torch.device) -> str:
    """NCCL for CUDA tensors, gloo for CPU tensors."""
    return "nccl" if device.type == "cuda" else "gloo"


class TorchCollectives:
    """Wraps an initialised default process group. Subgroups are created once per distinct
    rank set and cached for the life of the process (plan switches reuse them)."""

    def __init__(self, device: torch.device) -> None:
        if not dist.is_initialized():
            raise CollectiveError("torch.distributed is not initialised: call init_distributed")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.device = device
        self.backend = str(dist.get_backend())
        self.traffic = TrafficCounter()
        self._world = tuple(range(self.world_size))
        self._groups: dict[tuple[int, ...], dist.ProcessGroup] = {}

    def prepare_groups(self, groups: Sequence[tuple[int, ...]]) -> None:
        for ranks in groups:
            key = tuple(sorted(ranks))
            if key == self._world or key in self._groups or len(key) < 2:
                continue
            # new_group is collective over the whole world even for non-members.
            group = dist.new_group(ranks=list(key))
            if group is None:
                raise CollectiveError(f"torch.distributed could not create group {list(key)}")
            self._groups[key] = group

    def _group(self, ranks: tuple[int, ...]) -> dist.ProcessGroup | None:
        key = tuple(sorted(ranks))
        if key == self._world:
            return None
        try:
            return self._groups[key]
        except KeyError:
            raise CollectiveError(
                f"group {list(key)} was not prepared; call prepare_groups on every rank first"
            ) from None

    def all_reduce_sum(self, tensor: torch.Tensor, ranks: tuple[int, ...]) -> Work:
        if len(ranks) < 2:
            return DoneWork()
        self.traffic.add(ring_all_reduce_bytes(tensor.numel() * tensor.element_size(), len(ranks)))
        work: Work | None = dist.all_reduce(
            tensor, op=dist.ReduceOp.SUM, group=self._group(ranks), async_op=True
        )
        assert work is not None  # async_op=True always returns a handle
        return work

    def send(self, tensor: torch.Tensor, dst: int, tag: int) -> Work:
        self.traffic.add(tensor.numel() * tensor.element_size())
        work = dist.isend(tensor, dst, tag=tag)
        assert work is not None
        return work

    def recv(self, tensor: torch.Tensor, src: int, tag: int) -> Work:
        work = dist.irecv(tensor, src, tag=tag)
        assert work is not None
        return work

    def barrier(self) -> None:
        dist.barrier()


def init_distributed(
    rank: int,
    world_size: int,
    store_addr: str,
    *,
    device: str | torch.device = "cpu",
    backend: str = AUTO_BACKEND,
    timeout_s: float = 300.0,
) -> TorchCollectives:
    """Join (or create, on rank 0) a process group through a TCP store at ``host:port``.

    This is what each Ray actor calls before building its :class:`SPBTrainer`.
    """
    torch_device = torch.device(device)
    if torch_device.type == "cuda":
        torch.cuda.set_device(torch_device)
    chosen = pick_backend(torch_device) if backend == AUTO_BACKEND else backend
    if ":" not in store_addr:
        raise CollectiveError(f"store address must be 'host:port', got {store_addr!r}")
    if not dist.is_initialized():
        dist.init_process_group(
            chosen,
            init_method=f"tcp://{store_addr}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    return TorchCollectives(torch_device)


def shutdown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()

"""Start a local N-process group (tests, benchmarks, single-machine jobs).

The Ray executor does not use this: each of its actors calls
:func:`worker.spb.torch_collectives.init_distributed` with the gang's store address instead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import torch
from torch.multiprocessing.spawn import start_processes

from worker.spb.torch_collectives import TorchCollectives, init_distributed, shutdown_distributed

RankBody = Callable[..., Any]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _entry(
    rank: int,
    body: RankBody,
    world_size: int,
    store_addr: str,
    threads_per_rank: int | None,
    args: tuple[Any, ...],
) -> None:
    if threads_per_rank is not None:
        torch.set_num_threads(threads_per_rank)
    collectives: TorchCollectives = init_distributed(rank, world_size, store_addr)
    try:
        body(rank, collectives, *args)
        # No rank tears its sockets down while a peer still reads its last collective: gloo's
        # background thread aborts the peer process (SIGABRT, "terminate called without an
        # active exception") when the connection closes under an unfinished read.
        collectives.barrier()
    finally:
        shutdown_distributed()


def spawn_local(
    body: RankBody, world_size: int, *args: Any, threads_per_rank: int | None = 1
) -> None:
    """Run ``body(rank, collectives, *args)`` in ``world_size`` fresh processes joined by a gloo
    (CPU) process group. ``body`` must be importable (module-level). Raises if any rank fails.

    ``threads_per_rank`` caps torch's intra-op threads per process: N ranks sharing a few cores
    otherwise oversubscribe them badly.
    """
    store_addr = f"127.0.0.1:{free_port()}"
    # Children inherit the environment; keep OpenMP from spinning up a thread per core each.
    if threads_per_rank is not None:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_rank))
    start_processes(
        _entry,
        args=(body, world_size, store_addr, threads_per_rank, args),
        nprocs=world_size,
        join=True,
        start_method="spawn",
    )

"""Per-block gradient averaging over contributors, overlapped with backward.

One flat buffer per block (one collective per block, not per tensor). During backward, a
post-accumulate hook counts each trained block's parameters; when a block's last gradient
lands, its contributor all-reduce starts asynchronously while autograd keeps working on the
blocks nearer the input, the same overlap torch DDP gets from its buckets. Blocks are launched
strictly output side first so that every rank issues operations on a shared group in the same
order. After backward: wait, divide by ``|C_b|``, and the root sends the mean to the ranks
outside ``C_b``, which posted their receives before the forward pass even started.

With a :class:`~worker.spb.noise.BlockNoiseTracker`, each buffer carries one extra trailing
element, the contributor's own squared gradient norm, so the reduce also yields the mean of the
contributors' squared norms (the gradient-noise statistics, see :mod:`worker.spb.noise`).
With an :class:`~worker.spb.preconditioner.AdamPreconditioner` both squared norms are taken in
Adam's preconditioned space, and a block the optimizer has not stepped yet is not measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from worker.spb.collectives import Collectives, DoneWork, Work
from worker.spb.noise import BlockNoiseTracker
from worker.spb.preconditioner import AdamPreconditioner
from worker.spb.schedule import CommSchedule


@dataclass
class _BlockState:
    params: list[nn.Parameter]
    flat: Tensor | None = None
    reduce_work: Work | None = None
    arrived: int = 0
    launched: bool = False


class GradientSynchronizer:
    """Lives for one plan; :meth:`close` removes its hooks before a plan switch."""

    def __init__(
        self,
        blocks: list[nn.Module],
        schedule: CommSchedule,
        collectives: Collectives,
        noise: BlockNoiseTracker | None = None,
        preconditioner: AdamPreconditioner | None = None,
    ) -> None:
        self.schedule = schedule
        self.collectives = collectives
        self.noise = noise
        self.preconditioner = preconditioner
        self._unmeasured: set[int] = set()
        """Blocks whose noise this iteration does not measure (no preconditioner state yet)."""
        self._extra = 1 if noise is not None else 0
        rank = collectives.rank
        self._state = {
            b: _BlockState([p for p in blocks[b - 1].parameters() if p.requires_grad])
            for b in range(1, len(blocks) + 1)
        }
        self._contributed = schedule.contributed_blocks(rank)
        self._received = schedule.received_blocks(rank)
        self._recv_work: dict[int, Work] = {}
        self._send_work: list[Work] = []
        self._hooks: list[RemovableHandle] = []
        self.open()

    def open(self) -> None:
        """Register the gradient hooks (done on construction; again after :meth:`close`)."""
        if self._hooks:
            return
        for block in self._contributed:
            for param in self._state[block].params:
                self._hooks.append(param.register_post_accumulate_grad_hook(self._on_grad(block)))

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()

    def start_iteration(self) -> None:
        """Reset counters and post receives for blocks this rank does not train."""
        for state in self._state.values():
            state.flat, state.reduce_work, state.arrived, state.launched = None, None, 0, False
        self._send_work.clear()
        if self.preconditioner is not None and self.noise is not None:
            # The optimizer's state does not change until after finish(): one answer per block
            # for the whole iteration, the same on every rank.
            self._unmeasured = {
                block
                for block, state in self._state.items()
                if not self.preconditioner.ready(state.params)
            }
        for block in self._received:
            state = self._state[block]
            if not state.params:
                continue
            route = self.schedule.route(block)
            state.flat = torch.empty(
                sum(p.numel() for p in state.params) + self._extra,
                dtype=state.params[0].dtype,
                device=state.params[0].device,
            )
            self._recv_work[block] = self.collectives.recv(state.flat, route.root, tag=block)

    def _on_grad(self, block: int):  # type: ignore[no-untyped-def]
        def hook(_param: Tensor) -> None:
            state = self._state[block]
            state.arrived += 1
            if state.arrived == len(state.params):
                self._launch_ready()

        return hook

    def _launch_ready(self) -> None:
        for block in self._contributed:
            state = self._state[block]
            if state.launched:
                continue
            if state.arrived < len(state.params):
                return  # keep output-side-first order: wait for this block first
            self._launch(block)

    def _launch(self, block: int) -> None:
        state = self._state[block]
        # Unused parameters (no grad) count as zero so all ranks still step identically.
        grads = [
            p.grad.reshape(-1) if p.grad is not None else torch.zeros_like(p).reshape(-1)
            for p in state.params
        ]
        state.launched = True
        if not grads:  # a parameter-free block (e.g. pooling) has nothing to average
            state.flat, state.reduce_work = torch.zeros(0), DoneWork()
            return
        route = self.schedule.route(block)
        if self.noise is None:
            state.flat = torch.cat(grads)
        else:
            state.flat = torch.cat([*grads, grads[0].new_zeros(1)])
            if len(route.contributors) > 1 and block not in self._unmeasured:
                # (one contributor: nothing to estimate from)
                state.flat[-1] = self._squared_norm(block, state.flat[:-1])
        state.reduce_work = self.collectives.all_reduce_sum(state.flat, route.contributors)

    def finish(self) -> None:
        """Complete every block's averaging; afterwards each ``param.grad`` holds the mean over
        the block's contributors, bit-identical on every rank."""
        for block in self._contributed:
            if not self._state[block].launched:
                self._launch(block)
        for block in self._contributed:
            state = self._state[block]
            route = self.schedule.route(block)
            assert state.flat is not None and state.reduce_work is not None
            state.reduce_work.wait()
            if len(route.contributors) > 1:
                state.flat.div_(len(route.contributors))
            if route.root == self.collectives.rank and state.params:
                for dst in route.receivers:
                    self._send_work.append(self.collectives.send(state.flat, dst, tag=block))
            self._assign(block)
            self._record_noise(block)
        for block in self._received:
            if block in self._recv_work:
                self._recv_work.pop(block).wait()
                self._assign(block)
                self._record_noise(block)
        for work in self._send_work:
            work.wait()
        self._send_work.clear()

    def _record_noise(self, block: int) -> None:
        state = self._state[block]
        contributors = len(self.schedule.route(block).contributors)
        if self.noise is None or not state.params or contributors < 2 or block in self._unmeasured:
            return
        assert state.flat is not None
        total_sqr = self._squared_norm(block, state.flat[:-1])
        # [|mean|^2, mean over contributors of |g_r|^2]; read once per iteration by the tracker.
        self.noise.record(block, contributors, torch.stack([total_sqr, state.flat[-1]]))

    def _squared_norm(self, block: int, gradient: Tensor) -> Tensor:
        """``|gradient|^2``, in Adam's preconditioned space when there is a preconditioner."""
        if self.preconditioner is None:
            # vector_norm reads the buffer once; own.dot(own) would stream it twice.
            norm: Tensor = torch.linalg.vector_norm(gradient)
            return norm.square()
        return self.preconditioner.squared_norm(self._state[block].params, gradient)

    def _assign(self, block: int) -> None:
        state = self._state[block]
        assert state.flat is not None
        offset = 0
        for param in state.params:
            count = param.numel()
            param.grad = state.flat[offset : offset + count].view_as(param)
            offset += count


class BufferAverager:
    """Averages floating-point buffers (BatchNorm running mean/var) over all ranks each step.

    Every rank runs BatchNorm in training mode on its own shard, so running statistics would
    drift apart; averaging them keeps replicas bit-identical (weights *and* buffers) and makes
    the statistics describe the global batch. Integer buffers (``num_batches_tracked``) advance
    identically on every rank and are left alone. Launched right after the forward pass so it
    overlaps backward.
    """

    def __init__(self, blocks: list[nn.Module], collectives: Collectives) -> None:
        self.collectives = collectives
        self._buffers = [
            b for block in blocks for b in block.buffers() if torch.is_floating_point(b)
        ]
        self._world = tuple(range(collectives.world_size))
        self._flat: Tensor | None = None
        self._work: Work | None = None

    @property
    def active(self) -> bool:
        return bool(self._buffers) and self.collectives.world_size > 1

    def launch(self) -> None:
        if not self.active:
            return
        self._flat = torch.cat([b.reshape(-1) for b in self._buffers])
        self._work = self.collectives.all_reduce_sum(self._flat, self._world)

    def finish(self) -> None:
        if self._work is None or self._flat is None:
            return
        self._work.wait()
        self._flat.div_(self.collectives.world_size)
        offset = 0
        with torch.no_grad():
            for buffer in self._buffers:
                count = buffer.numel()
                buffer.copy_(self._flat[offset : offset + count].view_as(buffer))
                offset += count
        self._flat, self._work = None, None

"""The gang actor: one rank of a gang that runs leases of iterations for the driver.

It drives a :class:`~worker.runtime.lease_trainer.LeaseTrainer` chosen by the plan's kind
(data parallel / SPB, pipeline, hybrid); between control points it runs the engine in one
``run`` call (a pipeline drains at its end).

Two concurrency groups: the default group (one thread) runs ``setup`` and ``run_lease`` in the
order the driver sent them, so leases can be queued back to back; the ``control`` group answers
``heartbeat``, ``request_stop`` and ``offer_plan`` while a lease is running.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import ray
import torch
import torch.distributed as dist

from jigsaw.model.errors import InvalidSpecError
from jigsaw.planning.catalog import default_catalog
from worker.runtime.checkpoints import CheckpointStore
from worker.runtime.control import ControlChannel, is_control_point
from worker.runtime.hybrid_lease import HybridLease
from worker.runtime.lease_trainer import LeaseTrainer, RunOutcome
from worker.runtime.memory_limit import check_worker_memory
from worker.runtime.messages import GangConfig, Heartbeat, LeaseOrder, LeaseReport, PlanOffer
from worker.runtime.output_tail import output_tail
from worker.runtime.pipeline_lease import PipelineLease
from worker.runtime.spb_lease import SPBLease
from worker.spb import init_distributed, shutdown_distributed
from worker.spb.collectives import Collectives


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def choose_device(requested: str, gpu_index: int) -> str:
    """``auto``: the scheduler's GPU when this process can see CUDA, else the CPU.

    Ray reserved a (fractional) GPU on this node for the bundle; *which* GPU the worker uses is
    the scheduler's placement, so packed workers of different jobs share the GPU it chose.
    """
    if requested != "auto":
        return requested
    if ray.get_gpu_ids():
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    return "cuda:0" if torch.cuda.is_available() else "cpu"


class GangWorker:
    def __init__(self, rank: int, gpu_index: int) -> None:
        self.rank = rank
        self.gpu_index = gpu_index
        self.node_ip = ray.util.get_node_ip_address()
        self._trainer: LeaseTrainer | None = None
        self._config: GangConfig | None = None
        self._channel: ControlChannel | None = None
        self._halted = False
        self._stop_before_setup = False
        self._offers_before_setup: list[PlanOffer] = []
        self._busy = False
        self._last_progress = time.monotonic()
        self._iteration = 0
        self._lock = threading.Lock()
        self._last_report_at: float | None = None
        self._checkpointed_at: int | None = None
        self._evaluated = False
        self._memory_checked = False

    # -- setup -------------------------------------------------------------------------
    def rendezvous_address(self) -> str:
        """Rank 0 hosts the torch.distributed TCP store on its node's IP and a free port."""
        return f"{self.node_ip}:{_free_port(self.node_ip)}"

    def setup(self, config: GangConfig, store_addr: str) -> int:
        """Join the process group, build the trainer, restore; return the start iteration."""
        torch.set_num_threads(config.threads)
        device = choose_device(config.device, self.gpu_index)
        collectives = init_distributed(self.rank, config.world_size, store_addr, device=device)
        trainer = build_lease_trainer(config, collectives, device)
        check_against_catalog(config.model, trainer.num_blocks)
        limit = config.worker_memory_bytes
        if limit is not None:
            # Before anything is trained: does the model's size alone fit on every rank?
            static = self._reduce_max_with(trainer, [trainer.static_memory_bytes()])[0]
            check_worker_memory(static, limit, "weights, gradients, optimizer state")
        self._memory_checked = limit is None
        if config.restore_from is not None:
            trainer.load_checkpoint(Path(config.restore_from))
        channel = ControlChannel(PlanOffer(0, config.plan))
        with self._lock:
            # Requests that raced ahead of setup (a preemption right after the start).
            if self._stop_before_setup:
                channel.request_stop()
            for offer in self._offers_before_setup:
                channel.offer(offer)
            self._channel = channel
        self._trainer = trainer
        self._config = config
        self._iteration = trainer.iteration
        self._checkpointed_at = trainer.iteration if config.restore_from is not None else None
        self._last_progress = time.monotonic()
        return trainer.iteration

    # -- control group ------------------------------------------------------------------
    @ray.method(concurrency_group="control")
    def heartbeat(self) -> Heartbeat:
        with self._lock:
            return Heartbeat(
                rank=self.rank,
                iteration=self._iteration,
                busy=self._busy,
                seconds_since_progress=time.monotonic() - self._last_progress,
                pid=os.getpid(),
                node_ip=self.node_ip,
            )

    @ray.method(concurrency_group="control")
    def request_stop(self) -> None:
        with self._lock:
            self._stop_before_setup = True
            channel = self._channel
        if channel is not None:
            channel.request_stop()

    @ray.method(concurrency_group="control")
    def offer_plan(self, offer: PlanOffer) -> None:
        with self._lock:
            self._offers_before_setup.append(offer)
            channel = self._channel
        if channel is not None:
            channel.offer(offer)

    @ray.method(concurrency_group="control")
    def output_tail(self, lines: int) -> dict[str, list[str]]:
        """The last ``lines`` lines this worker wrote to stdout and stderr."""
        return output_tail(lines)

    # -- leases -------------------------------------------------------------------------
    def _reduce_max(self, values: list[int]) -> list[int]:
        assert self._trainer is not None
        return self._reduce_max_with(self._trainer, values)

    @staticmethod
    def _reduce_max_with(trainer: LeaseTrainer, values: list[int]) -> list[int]:
        tensor = torch.tensor(values, dtype=torch.int64, device=trainer.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return [int(v) for v in tensor.tolist()]

    def _check_measured_memory(self, outcome: RunOutcome, limit: int | None) -> None:
        """After the first step: the engine's measured peak, largest over the ranks."""
        self._memory_checked = True
        if limit is None:
            return
        peak = self._reduce_max([outcome.peak_memory_bytes])[0]
        check_worker_memory(peak, limit, "measured in the first step, activations included")

    def _mark_progress(self, iteration: int, busy: bool) -> None:
        with self._lock:
            self._iteration = iteration
            self._busy = busy
            self._last_progress = time.monotonic()

    def run_lease(self, order: LeaseOrder) -> LeaseReport:
        trainer, config, channel = self._trainer, self._config, self._channel
        if trainer is None or config is None or channel is None:
            raise RuntimeError("run_lease before setup: the driver must call setup first")
        began = time.perf_counter()
        idle_before = began - self._last_report_at if self._last_report_at is not None else 0.0
        start = trainer.iteration
        target = min(start + order.iterations, config.iterations)
        if self._halted:
            target = start
        channel.offer(order.plan)
        self._mark_progress(start, busy=True)
        switches: list[tuple[int, int]] = []
        stopped = self._halted
        control_s = steps_wall = 0.0
        runs: list[RunOutcome] = []

        def progressed(iteration: int) -> None:
            self._mark_progress(iteration, busy=True)

        try:
            while trainer.iteration < target:
                if is_control_point(trainer.iteration, start, config.control_every):
                    tick = time.perf_counter()
                    agreement = channel.agree(self._reduce_max)
                    if agreement.plan is not None:
                        trainer.switch_plan(agreement.plan.plan)
                        switches.append((agreement.plan.version, trainer.iteration))
                    control_s += time.perf_counter() - tick
                    if agreement.stop:
                        stopped = True
                        break
                every = config.control_every
                until = min((trainer.iteration // every + 1) * every, target)
                if not self._memory_checked:
                    until = trainer.iteration + 1
                tick = time.perf_counter()
                runs.append(trainer.run(until - trainer.iteration, progressed))
                steps_wall += time.perf_counter() - tick
                if not self._memory_checked:
                    self._check_measured_memory(runs[-1], config.worker_memory_bytes)
            finished = trainer.iteration >= config.iterations
            if finished and runs and not stopped:
                # A stop that arrived after the last control point: the scheduler already
                # recorded the preemption, so agree once more and checkpoint where the job
                # ends (every rank reaches this point: they share start and target).
                tick = time.perf_counter()
                stopped = channel.agree(self._reduce_max).stop
                control_s += time.perf_counter() - tick
            checkpoint, checkpoint_s = None, 0.0
            wanted = stopped or (order.checkpoint_after and not finished)
            if wanted and not self._halted and trainer.iteration != self._checkpointed_at:
                checkpoint, checkpoint_s = self._checkpoint(config)
                self._checkpointed_at = trainer.iteration
            metrics: dict[str, float] = {}
            eval_s = 0.0
            if finished and not stopped and not self._evaluated:
                # Collective for pipeline and hybrid gangs; rank 0 reports the score.
                tick = time.perf_counter()
                score = trainer.evaluate(config.eval_samples)
                if score is not None:
                    metrics[trainer.metric] = score
                eval_s = time.perf_counter() - tick
                self._evaluated = True
        finally:
            self._mark_progress(trainer.iteration, busy=False)
        if stopped:
            self._halted = True
        report = LeaseReport(
            job_id=config.job_id,
            attempt=config.attempt,
            rank=self.rank,
            lease=order.index,
            start_iteration=start,
            end_iteration=trainer.iteration,
            plan_version=channel.current.version,
            plan=trainer.current_plan(),
            num_blocks=trainer.num_blocks,
            switches=tuple(switches),
            stopped=stopped,
            losses=tuple(loss for r in runs for loss in r.losses),
            samples=sum(r.samples for r in runs),
            compute_s=sum(r.compute_s for r in runs),
            sync_s=sum(r.sync_s for r in runs),
            iteration_s=sum(r.iteration_s for r in runs),
            steps_wall_s=steps_wall,
            wall_s=time.perf_counter() - began,
            control_s=control_s,
            saved_activation_bytes=max((r.saved_activation_bytes for r in runs), default=0),
            peak_memory_bytes=max((r.peak_memory_bytes for r in runs), default=0),
            bytes_sent=sum(r.bytes_sent for r in runs),
            idle_before_s=idle_before,
            checkpoint=checkpoint,
            checkpoint_s=checkpoint_s,
            eval_s=eval_s,
            metrics=metrics,
            block_noise=trainer.noise_stats(),
            probe_iterations=sum(r.probes for r in runs),
        )
        self._last_report_at = time.perf_counter()
        return report

    def _checkpoint(self, config: GangConfig) -> tuple[str, float]:
        assert self._trainer is not None
        tick = time.perf_counter()
        store = CheckpointStore(config.checkpoint_root, config.job_id)
        path = store.path_for(self._trainer.iteration)
        self._trainer.save_checkpoint(path)
        if self.rank == 0:
            store.prune(config.checkpoints_kept)
        return str(path), time.perf_counter() - tick

    def close(self) -> None:
        if self._trainer is not None:
            self._trainer.close()
        shutdown_distributed()


# Ray's typed overloads of ``remote`` omit ``concurrency_groups``, a documented actor option.
RemoteGangWorker = ray.remote(concurrency_groups={"control": 2})(GangWorker)  # type: ignore[call-overload]


def build_lease_trainer(config: GangConfig, collectives: Collectives, device: str) -> LeaseTrainer:
    """The engine for the plan's kind: ``spb`` (data parallel), ``pipeline`` or ``hybrid``."""
    kind = config.plan.kind
    if kind != "spb" and config.optimizer != "sgd":
        raise InvalidSpecError(
            f"optimizer {config.optimizer!r} runs data parallel only; the {kind} engine trains "
            "with SGD: submit with parallelism data, or optimizer sgd",
            field="optimizer",
        )
    if kind == "pipeline":
        return PipelineLease(config, collectives, device)
    if kind == "hybrid":
        return HybridLease(config, collectives, device)
    return SPBLease(config, collectives, device)


def check_against_catalog(model: str, built_blocks: int) -> None:
    """The model a worker built must have the K the control plane resolved plans against."""
    known = default_catalog().num_blocks(model)
    if known is not None and known != built_blocks:
        raise InvalidSpecError(
            f"model {model!r} built with {built_blocks} blocks, but the model catalog says "
            f"{known}: the worker and the control plane run different versions",
            field="model",
        )

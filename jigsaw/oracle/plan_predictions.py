"""Predict every plan type: data parallel, pipeline (2BW or GPipe flush), hybrid (sharded).

Analytic, in the style of the Oracle for CNN parallelism (Kahira et al., 2021): each plan
type's per-worker compute, memory and bytes sent are sums of per-block terms of the model
profile, and its iteration time combines them with the hardware spec's compute rate and a
latency + bytes / bandwidth network model. The formulas follow what our engines do
(worker/pipeline, worker/hybrid), term by term; docs/PARALLELISM.md writes them out.

Conventions, shared with :mod:`jigsaw.oracle.costs`: FP32 everywhere; a worker's memory is
:func:`jigsaw.oracle.memory.worker_memory` of what it holds (SGD with momentum: one state
tensor per parameter); ``batch_size`` is per data-parallel worker (per replica for a
pipeline); a collective among ``n`` workers is a ring all-reduce that sends
``2 (n-1)/n x size`` per worker in ``2 (n-1)`` latency-bound steps; our engines do not overlap
communication with compute, so iteration time adds them. Gathers are all-reduces of a padded
buffer (that is what worker/hybrid sends).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.parallelism import HybridPlan, PipelinePlan, PlanType
from jigsaw.model.profiles import ModelProfile
from jigsaw.model.wording import counted
from jigsaw.oracle.memory import WorkerMemory, optimizer_state_copies, worker_memory
from jigsaw.oracle.parallel_profile import FLOAT_BYTES, LinearLayer, ParallelProfile

TARGET_BYTES = 8  # int64 class labels, gathered by the hybrid engine


@dataclass(frozen=True, slots=True)
class PlanPrediction:
    kind: PlanType
    """The plan type predicted (``data``, ``pipeline`` or ``hybrid``)."""
    describe: str
    per_worker_compute_s: tuple[float, ...]
    per_worker_memory: tuple[WorkerMemory, ...]
    per_worker_bytes_sent: tuple[int, ...]
    communication_s: float
    """Communication on the critical path of one iteration."""
    iteration_time_s: float
    samples_per_iteration: int

    @property
    def per_worker_memory_bytes(self) -> tuple[int, ...]:
        return tuple(m.total for m in self.per_worker_memory)

    @property
    def max_memory_bytes(self) -> int:
        return max(self.per_worker_memory_bytes)

    @property
    def samples_per_s(self) -> float:
        return self.samples_per_iteration / self.iteration_time_s

    @property
    def max_model_bytes(self) -> int:
        """The largest worker's memory for the model itself (parameters, gradients,
        optimizer state, activations; no workspace): what the engines measure and what a
        per-worker memory limit (``JIGSAW_WORKER_MEMORY_GIB``) covers."""
        return max(m.model_bytes for m in self.per_worker_memory)

    def fits(self, per_worker_memory_limit_bytes: int) -> bool:
        """Every worker's model memory is within the per-worker limit (the workspace is
        outside it: a GPU's default limit is its memory less the workspace)."""
        return self.max_model_bytes <= per_worker_memory_limit_bytes


class BlockSeconds:
    """Per-block per-sample seconds from measured times (same device kind) or FLOPs."""

    def __init__(self, profile: ModelProfile, hardware: HardwareSpec) -> None:
        self.profile = profile
        self.hw = hardware
        blocks = profile.blocks
        self.measured = profile.has_times_for(hardware.name)
        if self.measured:
            self.forward = [b.forward_time_s_per_sample or 0.0 for b in blocks]
            self.backward = [b.backward_time_s_per_sample or 0.0 for b in blocks]
        else:
            rate = hardware.effective_flops
            self.forward = [b.forward_flops_per_sample / rate for b in blocks]
            self.backward = [b.backward_flops_per_sample / rate for b in blocks]

    def step_s(self, blocks: Sequence[int]) -> float:
        """Forward + backward seconds per sample over 0-based ``blocks``."""
        return sum(self.forward[b] + self.backward[b] for b in blocks)

    def seconds_per_flop(self, block: int) -> float:
        """Seconds one FLOP of 0-based ``block`` costs (its measured time / its FLOPs)."""
        b = self.profile.blocks[block]
        flops = b.forward_flops_per_sample + b.backward_flops_per_sample
        if not self.measured or flops <= 0:
            return 1.0 / self.hw.effective_flops
        return (self.forward[block] + self.backward[block]) / flops


def _link(hardware: HardwareSpec, workers: int) -> tuple[float, float]:
    """(latency, bandwidth) of the slowest link a compact placement of ``workers`` uses."""
    if workers <= hardware.gpus_per_node:
        return hardware.intra_node_latency_s, hardware.intra_node_bandwidth
    return hardware.inter_node_latency_s, hardware.inter_node_bandwidth


def ring_bytes(size: float, members: int) -> float:
    return 2.0 * (members - 1) / members * size if members > 1 else 0.0


def all_reduce_s(hardware: HardwareSpec, size: float, members: int, span: int) -> float:
    if members < 2:
        return 0.0
    latency, bandwidth = _link(hardware, span)
    return 2 * (members - 1) * latency + ring_bytes(size, members) / bandwidth


def predict_data_parallel(
    profile: ModelProfile,
    hardware: HardwareSpec,
    num_workers: int,
    batch_size: int,
    optimizer: str = "sgd",
) -> PlanPrediction:
    """Every worker: forward + backward of all blocks on its batch, then one all-reduce.
    Each holds ``optimizer``'s state for the whole model (SGD: the momentum; AdamW: two
    moments)."""
    _check_batch(batch_size)
    costs = BlockSeconds(profile, hardware)
    k = profile.num_blocks
    compute = hardware.iteration_overhead_s + batch_size * costs.step_s(range(k))
    params = profile.param_bytes
    acts = batch_size * sum(b.activation_bytes_per_sample for b in profile.blocks)
    comm = all_reduce_s(hardware, params, num_workers, num_workers)
    memory = worker_memory(
        params,
        acts,
        optimizer_copies=optimizer_state_copies(optimizer),
        workspace_bytes=hardware.workspace_bytes,
    )
    return PlanPrediction(
        kind="data",
        describe=f"data x {counted(num_workers, 'worker')}",
        per_worker_compute_s=(compute,) * num_workers,
        per_worker_memory=(memory,) * num_workers,
        per_worker_bytes_sent=(round(ring_bytes(params, num_workers)),) * num_workers,
        communication_s=comm,
        iteration_time_s=compute + comm,
        samples_per_iteration=batch_size * num_workers,
    )


def predict_pipeline(
    profile: ParallelProfile,
    hardware: HardwareSpec,
    plan: PipelinePlan,
    batch_size: int,
    lease_iterations: int | None = None,
) -> PlanPrediction:
    """Stage s of S, replica batch B in m micro-batches of b = B/m samples.

    - compute_s = B x (F_s + G_s); the bottleneck stage's micro-batch time
      t = b x (F_s + G_s) + p2p_s sets the pace.
    - 2BW (1F1B, no flush): T = m t + all-reduce_s + (S-1) t / lease (fill and drain once
      per lease; ``lease_iterations=None`` is the steady state). GPipe: T = (m + S - 1) t +
      all-reduce_s (fill and drain every batch).
    - memory: versions x P_s weights (2 under 2BW, 1 under GPipe) + gradients + momentum +
      in-flight micro-batches x b x A_s, with min(S - s, m) in flight under 1F1B and m under
      GPipe.
    - bytes: activations forward (not the last stage), input gradients backward (not the
      first), the stage's all-reduce across replicas.
    """
    blocks = profile.blocks
    if plan.num_blocks != blocks.num_blocks:
        raise InvalidSpecError(
            f"the plan is for {plan.num_blocks} blocks, the model has {blocks.num_blocks}",
            field="stages",
        )
    _check_batch(batch_size)
    if batch_size % plan.micro_batches:
        raise InvalidSpecError(
            f"batch size {batch_size} is not a multiple of {plan.micro_batches} micro-batches",
            field="batch_size",
        )
    costs = BlockSeconds(blocks, hardware)
    s_count, m = plan.num_stages, plan.micro_batches
    micro = batch_size // m
    latency, bandwidth = _link(hardware, plan.num_workers)
    compute: list[float] = []
    memory: list[WorkerMemory] = []
    sent: list[int] = []
    micro_times: list[float] = []
    p2p_times: list[float] = []
    reduce_times: list[float] = []
    for stage in range(s_count):
        indices = plan.blocks_of(stage)
        per_sample = costs.step_s(indices)
        compute.append(hardware.iteration_overhead_s + batch_size * per_sample)
        params = sum(blocks.blocks[b].param_bytes for b in indices)
        out_bytes = profile.output_bytes_per_sample[indices[-1]] if stage < s_count - 1 else 0
        in_bytes = profile.output_bytes_per_sample[indices[0] - 1] if stage > 0 else 0
        p2p_micro = sum(
            latency + micro * size / bandwidth for size in (out_bytes, in_bytes) if size
        )
        micro_times.append(micro * per_sample + p2p_micro)
        p2p_times.append(p2p_micro)
        reduce_times.append(all_reduce_s(hardware, params, plan.replicas, plan.num_workers))
        in_flight = min(s_count - stage, m) if plan.schedule == "2bw" else m
        acts = (
            in_flight * micro * sum(blocks.blocks[b].activation_bytes_per_sample for b in indices)
        )
        memory.append(
            worker_memory(
                params,
                acts,
                weight_versions=plan.weight_versions(),
                workspace_bytes=hardware.workspace_bytes,
            )
        )
        sent.append(round(batch_size * (out_bytes + in_bytes) + ring_bytes(params, plan.replicas)))
    t = max(micro_times)
    if plan.schedule == "2bw":
        fill = (s_count - 1) * t / lease_iterations if lease_iterations else 0.0
        pipeline_s = m * t + fill
    else:
        pipeline_s = (m + s_count - 1) * t
    reduce_s = max(reduce_times)
    iteration = hardware.iteration_overhead_s + pipeline_s + reduce_s
    comm = reduce_s + m * p2p_times[micro_times.index(t)]
    return PlanPrediction(
        kind="pipeline",
        describe=plan.describe(),
        per_worker_compute_s=tuple(compute[plan.stage_of(r)] for r in range(plan.num_workers)),
        per_worker_memory=tuple(memory[plan.stage_of(r)] for r in range(plan.num_workers)),
        per_worker_bytes_sent=tuple(sent[plan.stage_of(r)] for r in range(plan.num_workers)),
        communication_s=comm,
        iteration_time_s=iteration,
        samples_per_iteration=batch_size * plan.replicas,
    )


def predict_hybrid(
    profile: ParallelProfile, hardware: HardwareSpec, plan: HybridPlan, batch_size: int
) -> PlanPrediction:
    """N workers, local batch B, global batch G = N B.

    - data-parallel blocks: B x (F + G) each; their weights, gradients, momentum whole.
    - sharded blocks: linear-layer FLOPs on the global batch split N ways (G/N = B samples'
      worth), everything else in the block computed redundantly on all G samples; linear
      weights (and column-layout biases) held 1/N per worker; activations of all G samples.
    - bytes: gather of the batch (and labels) at the first sharded block; per column layer a
      feature gather forward and an input-gradient all-reduce backward; per row layer an
      output all-reduce forward and an input-gradient gather backward; the all-reduce of the
      data-parallel gradients.
    """
    blocks = profile.blocks
    if plan.num_blocks != blocks.num_blocks:
        raise InvalidSpecError(
            f"the plan is for {plan.num_blocks} blocks, the model has {blocks.num_blocks}",
            field="sharded",
        )
    plan.check_linear_layers(profile.linear_counts())
    _check_batch(batch_size)
    costs = BlockSeconds(blocks, hardware)
    n = plan.num_workers
    g = batch_size * n
    first = plan.first_sharded - 1
    dp = range(first)
    dp_params = sum(blocks.blocks[b].param_bytes for b in dp)
    compute = hardware.iteration_overhead_s + batch_size * costs.step_s(dp)
    params = float(dp_params)
    acts = batch_size * sum(blocks.blocks[b].activation_bytes_per_sample for b in dp)
    sent = ring_bytes(dp_params, n)
    entry = profile.output_bytes_per_sample[first - 1] if first > 0 else _input_bytes(blocks)
    sent += ring_bytes(g * entry, n) + ring_bytes(g * TARGET_BYTES, n)
    collectives = 2 + (1 if dp_params else 0)
    for b in range(first, blocks.num_blocks):
        block = blocks.blocks[b]
        layout = plan.layout_of(b + 1)
        layers = [layer for layer in profile.linear_layers if layer.block == b + 1]
        linear_flops = sum(3.0 * layer.forward_flops_per_sample for layer in layers)
        block_flops = block.forward_flops_per_sample + block.backward_flops_per_sample
        per_flop = costs.seconds_per_flop(b)
        rest = max(block_flops - linear_flops, 0.0)
        compute += g * per_flop * (rest + linear_flops / n)
        linear_params = sum(layer.weight_bytes + layer.bias_bytes for layer in layers)
        params += block.param_bytes - linear_params
        for layer in layers:
            # The first (size % n) workers hold one more row/column: predict the largest.
            if layout == "row":
                share = -(-layer.in_features // n) * layer.out_features + layer.out_features
            else:
                share = -(-layer.out_features // n) * (layer.in_features + 1)
            params += FLOAT_BYTES * (share if layer.bias else share - _bias_part(layer, layout, n))
        acts += g * block.activation_bytes_per_sample
        for layer in layers:
            sent += ring_bytes(g * layer.out_features * FLOAT_BYTES, n)
            sent += ring_bytes(g * layer.in_features * FLOAT_BYTES, n)
            collectives += 2
    latency, bandwidth = _link(hardware, n)
    comm = (collectives * 2 * (n - 1) * latency + sent / bandwidth) if n > 1 else 0.0
    memory = worker_memory(round(params), acts, workspace_bytes=hardware.workspace_bytes)
    return PlanPrediction(
        kind="hybrid",
        describe=plan.describe(),
        per_worker_compute_s=(compute,) * n,
        per_worker_memory=(memory,) * n,
        per_worker_bytes_sent=(round(sent),) * n,
        communication_s=comm,
        iteration_time_s=compute + comm,
        samples_per_iteration=g,
    )


def replica_batch(plan: PipelinePlan | HybridPlan, batch_size: int) -> int:
    """The batch ``predict_plan`` is given for a job whose per-worker batch is ``batch_size``,
    keeping the job's global batch (workers x batch_size) the same under every plan type: a
    pipeline replica of S stages takes ``S x batch_size`` samples per iteration (in its
    micro-batches); a hybrid worker takes ``batch_size``."""
    if isinstance(plan, PipelinePlan):
        return batch_size * plan.num_stages
    return batch_size


def predict_plan(
    profile: ParallelProfile,
    hardware: HardwareSpec,
    plan: int | PipelinePlan | HybridPlan,
    batch_size: int,
    lease_iterations: int | None = None,
) -> PlanPrediction:
    """``plan`` is a worker count (data parallel), a PipelinePlan or a HybridPlan."""
    if isinstance(plan, PipelinePlan):
        return predict_pipeline(profile, hardware, plan, batch_size, lease_iterations)
    if isinstance(plan, HybridPlan):
        return predict_hybrid(profile, hardware, plan, batch_size)
    if isinstance(plan, bool) or not isinstance(plan, int) or plan < 1:
        raise InvalidSpecError(
            f"a data-parallel plan is a worker count, got {plan!r}", field="plan"
        )
    return predict_data_parallel(profile.blocks, hardware, plan, batch_size)


def _bias_part(layer: LinearLayer, layout: str | None, n: int) -> int:
    return layer.out_features if layout == "row" else -(-layer.out_features // n)


def _input_bytes(profile: ModelProfile) -> int:
    # Without data-parallel blocks the gather moves raw inputs; the first block's saved
    # activations start with its input, the best proxy the block profile has.
    return profile.blocks[0].activation_bytes_per_sample


def _check_batch(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidSpecError(
            f"batch size must be a positive integer, got {batch_size!r}", field="batch_size"
        )

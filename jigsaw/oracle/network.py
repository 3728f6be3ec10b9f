"""Communication cost of one plan on one placement (the engine's collective scheme).

For each gradient group (blocks with the same contributor set ``C``, a prefix of the ranks
sorted by depth): a ring all-reduce among ``C``, then a pipelined chain broadcast from the
first contributor to every non-contributor. Each collective runs at the speed of the slowest
link it uses: inter-node if its ranks span nodes, intra-node if they span GPUs of one node,
device-local if they all share one GPU. Rings and chains visit ranks node by node, so each
node's NIC carries one flow in and one out per collective.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.hardware import HardwareSpec
from jigsaw.oracle.costs import PlanCosts


@dataclass(frozen=True, slots=True)
class PlacementCosts:
    local_comm_s: float
    """Seconds in collectives that stay inside nodes (not slowed by NIC contention)."""
    inter_node_comm_s: float
    """Seconds in collectives that cross nodes (slowed when a NIC is over-subscribed)."""
    nic_busy_s: tuple[tuple[int, float], ...]
    """Per node: seconds per iteration its NIC is busy with this job (busier direction)."""
    gpu_busy_s: tuple[tuple[GpuId, float], ...]
    """Per GPU: summed compute seconds of this job's workers on it (they take turns)."""
    gpus_on_busiest_node: int

    @property
    def comm_s(self) -> float:
        return self.local_comm_s + self.inter_node_comm_s


def placement_costs(
    plan: PlanCosts, placement: Placement, hardware: HardwareSpec
) -> PlacementCosts:
    order = plan.rank_order
    n = len(order)
    local = 0.0
    inter = 0.0
    out_bytes: dict[int, float] = {}
    in_bytes: dict[int, float] = {}
    for group in plan.groups:
        c, size = group.contributors, float(group.param_bytes)
        if size <= 0.0:
            continue
        if c > 1:
            members = [placement[r] for r in order[:c]]
            latency, bandwidth, crosses = _link(members, hardware)
            seconds = 2.0 * (c - 1) * latency + 2.0 * (c - 1) / c * size / bandwidth
            if crosses:
                inter += seconds
                ring_bytes = 2.0 * (c - 1) / c * size
                for node in {gpu[0] for gpu in members}:
                    out_bytes[node] = out_bytes.get(node, 0.0) + ring_bytes
                    in_bytes[node] = in_bytes.get(node, 0.0) + ring_bytes
            else:
                local += seconds
        if c < n:
            chain = [placement[order[0]], *sorted(placement[r] for r in order[c:])]
            latency, bandwidth, crosses = _link(chain, hardware)
            seconds = (len(chain) - 1) * latency + size / bandwidth
            if crosses:
                inter += seconds
                for sender, receiver in pairwise(chain):
                    if sender[0] != receiver[0]:
                        out_bytes[sender[0]] = out_bytes.get(sender[0], 0.0) + size
                        in_bytes[receiver[0]] = in_bytes.get(receiver[0], 0.0) + size
            else:
                local += seconds
    nodes = set(out_bytes) | set(in_bytes)
    nic_busy = tuple(
        sorted(
            (
                node,
                max(out_bytes.get(node, 0.0), in_bytes.get(node, 0.0))
                / hardware.inter_node_bandwidth,
            )
            for node in nodes
        )
    )
    gpu_busy: dict[GpuId, float] = {}
    for rank, gpu in enumerate(placement):
        gpu_busy[gpu] = gpu_busy.get(gpu, 0.0) + plan.compute_s[rank]
    per_node: dict[int, int] = {}
    for gpu in gpu_busy:
        per_node[gpu[0]] = per_node.get(gpu[0], 0) + 1
    return PlacementCosts(
        local_comm_s=local,
        inter_node_comm_s=inter,
        nic_busy_s=nic_busy,
        gpu_busy_s=tuple(gpu_busy.items()),
        gpus_on_busiest_node=max(per_node.values()),
    )


def _link(gpus: list[GpuId], hardware: HardwareSpec) -> tuple[float, float, bool]:
    """(latency, bandwidth, crosses nodes) of the slowest link among these GPUs."""
    first = gpus[0]
    if any(g[0] != first[0] for g in gpus):
        return hardware.inter_node_latency_s, hardware.inter_node_bandwidth, True
    if any(g != first for g in gpus):
        return hardware.intra_node_latency_s, hardware.intra_node_bandwidth, False
    return 0.0, hardware.same_gpu_bandwidth, False

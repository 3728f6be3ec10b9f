"""Hardware specs the oracle prices work on: GPU speed and memory, links, latencies.

Every preset is a datasheet figure (the rated number) plus the calibrated efficiencies from
``jigsaw/data/calibration.json`` (what training actually achieves). The ``t4`` preset is the
Pollux testbed (AWS g4dn.12xlarge: 4 T4 GPUs per node, 50 Gbit/s Ethernet) on which the
calibration data was measured, so its links use the *fitted* effective bandwidths and
latencies directly. See docs/ORACLE.md for every number's source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.numerics import GIB

GB = 10**9


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """One GPU type in one kind of node. Bandwidths are *effective* bytes per second."""

    name: str
    rated_flops: float
    """Dense FP32 (non-tensor-core) peak FLOP/s from the datasheet."""
    compute_efficiency: float
    """Fraction of ``rated_flops`` a training step achieves (calibrated on the Pollux T4s)."""
    memory_bytes: int
    gpus_per_node: int
    intra_node_bandwidth: float
    """Bytes/s one ring step moves between two GPUs of one node."""
    inter_node_bandwidth: float
    """Bytes/s one node's NIC moves to another node (shared by every flow on that node)."""
    intra_node_latency_s: float
    inter_node_latency_s: float
    iteration_overhead_s: float
    """Fixed per-iteration time that does not scale with the batch (launches, optimizer)."""
    workspace_bytes: int
    """Per-worker memory outside the model: CUDA context, allocator slack, cuDNN workspace."""
    overlap_fraction: float = 0.38
    """Share of compute time the gradient all-reduce can hide behind (calibrated)."""
    overlap_smoothness: float = 0.06
    """Width of the soft corner between hidden and exposed sync, relative to comm time."""
    unhidden_tail_fraction: float = 0.29
    """Share of comm time that is never hidden (the last bucket after backward ends)."""
    node_straggler_fraction: float = 0.006
    """Extra wait per additional busy GPU on a node, as a share of compute (calibrated)."""
    same_gpu_bandwidth: float = 200.0 * GB
    """Bytes/s between two workers packed on one GPU (a device-local copy)."""

    def __post_init__(self) -> None:
        positive = {
            "rated_flops": self.rated_flops,
            "compute_efficiency": self.compute_efficiency,
            "memory_bytes": self.memory_bytes,
            "gpus_per_node": self.gpus_per_node,
            "intra_node_bandwidth": self.intra_node_bandwidth,
            "inter_node_bandwidth": self.inter_node_bandwidth,
            "same_gpu_bandwidth": self.same_gpu_bandwidth,
        }
        for field_name, value in positive.items():
            if not value > 0:
                raise InvalidSpecError(
                    f"hardware {self.name!r}: {field_name} must be positive, got {value}",
                    field=field_name,
                )
        fractions = {
            "overlap_fraction": self.overlap_fraction,
            "overlap_smoothness": self.overlap_smoothness,
            "unhidden_tail_fraction": self.unhidden_tail_fraction,
            "node_straggler_fraction": self.node_straggler_fraction,
        }
        for field_name, value in fractions.items():
            if not 0.0 <= value <= 1.0:
                raise InvalidSpecError(
                    f"hardware {self.name!r}: {field_name} must be in [0, 1], got {value}",
                    field=field_name,
                )

    @property
    def effective_flops(self) -> float:
        return self.rated_flops * self.compute_efficiency


@dataclass(frozen=True, slots=True)
class _Datasheet:
    rated_flops: float
    memory_bytes: int
    gpus_per_node: int
    intra_node_bandwidth: float
    inter_node_bandwidth: float
    source: str


# Rated figures. Link rates are per direction; inter-node is the node's NIC.
_DATASHEETS: dict[str, _Datasheet] = {
    "k80": _Datasheet(
        4.37e12,
        12 * GIB,
        8,
        10.0 * GB,
        1.25 * GB,
        "one GK210 die of a K80 board; PCIe 3.0; 10 GbE (AWS p2)",
    ),
    "p100": _Datasheet(
        10.6e12,
        16 * GIB,
        8,
        80.0 * GB,
        12.5 * GB,
        "P100 SXM2; NVLink 1 (4 links); 100 Gb/s EDR InfiniBand",
    ),
    "v100": _Datasheet(
        15.7e12,
        32 * GIB,
        8,
        150.0 * GB,
        12.5 * GB,
        "V100 SXM2 32GB; NVLink 2 (6 links); 100 Gb/s EDR InfiniBand",
    ),
    "a100": _Datasheet(
        19.5e12,
        80 * GIB,
        8,
        300.0 * GB,
        25.0 * GB,
        "A100 SXM4 80GB; NVLink 3; 200 Gb/s HDR InfiniBand",
    ),
    "h100": _Datasheet(
        67.0e12, 80 * GIB, 8, 450.0 * GB, 50.0 * GB, "H100 SXM5; NVLink 4; 400 Gb/s NDR InfiniBand"
    ),
    "t4": _Datasheet(
        8.1e12,
        16 * GIB,
        4,
        16.0 * GB,
        6.25 * GB,
        "T4 on AWS g4dn.12xlarge (Pollux testbed); PCIe 3.0 x16; 50 Gb/s",
    ),
    "cpu": _Datasheet(
        1.0e12,
        64 * GIB,
        1,
        10.0 * GB,
        1.25 * GB,
        "one 2-socket AVX2 server as one worker; shared memory; 10 GbE",
    ),
}

# Fraction of a datasheet link rate that NCCL-style ring collectives reach (bus bandwidth) on
# well-configured NVLink/InfiniBand systems. Not measured here; used for presets other than
# the calibrated t4, whose links come straight from the fit.
DEFAULT_LINK_EFFICIENCY = 0.7
DEFAULT_INTRA_LATENCY_S = 10e-6
DEFAULT_INTER_LATENCY_S = 50e-6
DEFAULT_WORKSPACE_BYTES = 1 * GIB
CPU_WORKSPACE_BYTES = 256 * 2**20

PRESET_NAMES = tuple(_DATASHEETS)
DEFAULT_GPU_TYPE = "v100"
"""The GPU type wherever none is given or reported: the simulator, the service
(``JIGSAW_GPU_TYPE``), Ray nodes that name no accelerator, and the oracle's predictions."""


def preset(name: str) -> HardwareSpec:
    """A named preset (``k80 p100 v100 a100 h100 t4 cpu``), calibrated where data allows."""
    return _preset(_check_name(name))


@cache
def _preset(name: str) -> HardwareSpec:
    sheet = _DATASHEETS[name]
    calibration = load_calibration()
    globals_ = calibration.get("global", {})
    links = globals_.get("t4_links", {}) if name == "t4" else {}
    efficiency = DEFAULT_LINK_EFFICIENCY
    return HardwareSpec(
        name=name,
        rated_flops=sheet.rated_flops,
        compute_efficiency=float(globals_.get("compute_efficiency", 0.5)),
        memory_bytes=sheet.memory_bytes,
        gpus_per_node=sheet.gpus_per_node,
        intra_node_bandwidth=float(
            links.get("intra_node_bandwidth", sheet.intra_node_bandwidth * efficiency)
        ),
        inter_node_bandwidth=float(
            links.get("inter_node_bandwidth", sheet.inter_node_bandwidth * efficiency)
        ),
        intra_node_latency_s=float(links.get("intra_node_latency_s", DEFAULT_INTRA_LATENCY_S)),
        inter_node_latency_s=float(links.get("inter_node_latency_s", DEFAULT_INTER_LATENCY_S)),
        iteration_overhead_s=float(globals_.get("iteration_overhead_s", 0.02)),
        workspace_bytes=CPU_WORKSPACE_BYTES if name == "cpu" else DEFAULT_WORKSPACE_BYTES,
        overlap_fraction=float(globals_.get("overlap_fraction", 0.38)),
        overlap_smoothness=max(0.01, float(globals_.get("overlap_smoothness", 0.06))),
        unhidden_tail_fraction=float(globals_.get("unhidden_tail_fraction", 0.29)),
        node_straggler_fraction=float(globals_.get("node_straggler_fraction", 0.006)),
    )


def reload_calibration() -> None:
    """Forget cached presets and calibration (after ``calibration.json`` was rewritten)."""
    load_calibration.cache_clear()
    _preset.cache_clear()


def with_overrides(spec: HardwareSpec, **changes: Any) -> HardwareSpec:
    """A copy with some fields replaced (validated again), e.g. a 4-GPU-per-node V100."""
    return replace(spec, **changes)


def _check_name(name: str) -> str:
    key = name.strip().lower()
    if key not in _DATASHEETS:
        raise InvalidSpecError(
            f"unknown hardware preset {name!r}; known presets: {', '.join(PRESET_NAMES)}",
            field="hardware",
        )
    return key


@cache
def load_calibration() -> dict[str, Any]:
    """The fitted parameters written by ``bench/oracle_calibration.py`` ({} if absent)."""
    try:
        text = resources.files("jigsaw").joinpath("data/calibration.json").read_text()
    except (FileNotFoundError, OSError):
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise InvalidSpecError("jigsaw/data/calibration.json must hold a JSON object")
    return data

"""Connect to Ray and present its nodes to the scheduler as a :class:`jigsaw.model.cluster.Cluster`.

Node indexes are stable for the life of the process: a node keeps its index when it dies (it
is reported with ``alive=False``, which is how the scheduling cycle learns that gangs placed on
it are lost) and a new node gets the next free index. Nodes without GPUs (a KubeRay head) are
not offered to the scheduler.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import ray

from jigsaw.model.cluster import DEFAULT_GPU_MEMORY_BYTES, Cluster, Node
from jigsaw.model.hardware import DEFAULT_GPU_TYPE
from worker.runtime import process_tree
from worker.runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)

_LOCAL_RAY_PROCESSES: list[process_tree.Process] = []
"""The processes of the local Ray this process started (Ray's own state is per process too)."""


@dataclass(frozen=True, slots=True)
class RayNode:
    """What we know of one Ray node: its id (for placement-group label selectors) and IP."""

    index: int
    node_id: str
    ip: str
    hostname: str
    num_gpus: int
    gpu_type: str
    alive: bool


def worker_runtime_env(settings: RuntimeSettings) -> dict[str, Any]:
    """Environment for every gang actor: thread caps (many ranks share few cores) and, when
    the project is not pip-installed, the repository on PYTHONPATH."""
    env_vars = {
        "OMP_NUM_THREADS": str(settings.threads_per_worker),
        "MKL_NUM_THREADS": str(settings.threads_per_worker),
    }
    pythonpath = settings.pythonpath or os.environ.get("PYTHONPATH")
    if pythonpath:
        env_vars["PYTHONPATH"] = pythonpath
    return {"env_vars": env_vars}


def connect(settings: RuntimeSettings) -> None:
    """Join ``settings.ray_address`` or start a local Ray (logical GPUs, no dashboard).

    Call it on the main thread where the process will handle SIGTERM: Ray's C++ core then
    installs its failure signal handler before the process's own (uvicorn's) replaces it. On
    another thread it would come later and sit on top, and a SIGTERM could abort the process
    in ``ray.shutdown()``."""
    if ray.is_initialized():
        return
    runtime_env = worker_runtime_env(settings)
    if settings.ray_address:
        ray.init(
            address=settings.ray_address,
            runtime_env=runtime_env,
            log_to_driver=False,
            namespace="jigsaw",
        )
        return
    ray.init(
        num_cpus=settings.local_cpus if settings.local_cpus is not None else os.cpu_count(),
        num_gpus=settings.local_gpus,
        include_dashboard=False,
        runtime_env=runtime_env,
        log_to_driver=False,
        namespace="jigsaw",
        _temp_dir=settings.ray_temp_dir,
    )
    # Its GCS, raylet and the raylet's agents are up now: remember them for disconnect().
    _LOCAL_RAY_PROCESSES.extend(process_tree.descendants(os.getpid()))


def disconnect() -> None:
    """Leave Ray; the local Ray :func:`connect` started goes with it, agents included.

    ``ray.shutdown()`` stops the processes it started, but not always the raylet's dashboard
    and runtime-env agents (~230 MB, deaf to SIGTERM): after the driver got SIGTERM, the
    raylet may be gone and the agents re-parented to init. So every process the local Ray
    consisted of when it came up is stopped too, if it still runs.
    """
    if ray.is_initialized():
        ray.shutdown()
    left = process_tree.stop(_LOCAL_RAY_PROCESSES)
    _LOCAL_RAY_PROCESSES.clear()
    if left:
        pids = [pid for pid, _ in left]
        log.info("stopped %d process(es) Ray left running: pids %s", len(pids), pids)


class RayInventory:
    """Maps live Ray nodes to stable node indexes; thread-safe."""

    def __init__(self, default_gpu_type: str = DEFAULT_GPU_TYPE) -> None:
        self._default_gpu_type = default_gpu_type
        self._index_of: dict[str, int] = {}
        self._nodes: dict[int, RayNode] = {}
        self._lock = threading.Lock()

    def refresh(self) -> list[RayNode]:
        raw = sorted(ray.nodes(), key=lambda n: (n["NodeManagerAddress"], n["NodeID"]))
        with self._lock:
            seen: set[int] = set()
            for entry in raw:
                resources = entry.get("Resources", {})
                gpus = int(resources.get("GPU", 0))
                node_id = entry["NodeID"]
                if gpus < 1 and node_id not in self._index_of:
                    continue
                index = self._index_of.setdefault(node_id, len(self._index_of))
                known = self._nodes.get(index)
                alive = bool(entry.get("Alive", False))
                self._nodes[index] = RayNode(
                    index=index,
                    node_id=node_id,
                    ip=entry["NodeManagerAddress"],
                    hostname=entry.get("NodeManagerHostname", entry["NodeManagerAddress"]),
                    num_gpus=gpus if gpus > 0 or known is None else known.num_gpus,
                    gpu_type=_accelerator_type(resources) or self._default_gpu_type,
                    alive=alive and gpus > 0,
                )
                seen.add(index)
            # A node Ray forgot entirely is as lost as one it reports dead.
            for index, node in self._nodes.items():
                if index not in seen and node.alive:
                    self._nodes[index] = RayNode(**{**_as_dict(node), "alive": False})
            return [self._nodes[i] for i in sorted(self._nodes)]

    def node(self, index: int) -> RayNode:
        with self._lock:
            return self._nodes[index]

    def cluster(self) -> Cluster:
        return cluster_of(self.refresh())


def cluster_of(nodes: list[RayNode]) -> Cluster:
    return Cluster(
        tuple(
            Node(
                index=node.index,
                name=f"{node.hostname}-{node.node_id[:6]}",
                num_gpus=node.num_gpus,
                gpu_memory_bytes=DEFAULT_GPU_MEMORY_BYTES,
                gpu_type=node.gpu_type,
                alive=node.alive,
            )
            for node in nodes
        )
    )


def ray_cluster(settings: RuntimeSettings | None = None) -> Cluster:
    """The live Ray cluster as the scheduler sees it (connects first if needed)."""
    chosen = settings or RuntimeSettings.from_env()
    connect(chosen)
    return RayInventory(chosen.gpu_type).cluster()


def _accelerator_type(resources: dict[str, float]) -> str | None:
    for key in resources:
        if key.startswith("accelerator_type:"):
            return key.split(":", 1)[1].lower()
    return None


def _as_dict(node: RayNode) -> dict[str, Any]:
    return {name: getattr(node, name) for name in RayNode.__slots__}

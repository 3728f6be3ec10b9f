"""The Ray runtime: gangs of SPB workers in placement groups, driven by iteration leases.

- :mod:`worker.runtime.settings`    - every knob, read from ``JIGSAW_*`` environment variables;
- :mod:`worker.runtime.inventory`   - connect to Ray and map its nodes onto a ``Cluster``;
- :mod:`worker.runtime.messages`    - what the driver and the gang's actors exchange;
- :mod:`worker.runtime.control`     - agreement among ranks on stop requests and plan versions;
- :mod:`worker.runtime.gang_worker` - the actor: one SPB rank that runs leases;
- :mod:`worker.runtime.checkpoints` - where a job's checkpoints live, which is the latest;
- :mod:`worker.runtime.gang`        - the driver side of one gang: reserve, launch, lease loop;
- :mod:`worker.runtime.failures`    - root cause of a gang's failure, and whether to retry;
- :mod:`worker.runtime.heartbeats`  - hung-rank detection;
- :mod:`worker.runtime.summary`     - per-rank lease reports -> ``Progressed`` metrics;
- :mod:`worker.runtime.ledger`      - idempotent progress reports keyed by (job, attempt, it).

:class:`worker.ray_executor.RayExecutor` ties them to the scheduler's Executor seam.
See docs/RUNTIME.md.
"""

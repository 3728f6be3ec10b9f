"""The decision log: one line per applied decision, hashed as it grows.

Same seed and trace must give byte-identical logs
(tests/core/simulator/test_simulator_determinism.py).
"""

from __future__ import annotations

import hashlib

from jigsaw.model.decisions import Decision, Preempt, Replan, Resize, Start


def describe(at: float, decision: Decision) -> str:
    match decision:
        case Start(job_id=job_id, placement=placement, plan=plan, reason=reason):
            gpus = " ".join(f"{n}:{g}" for n, g in placement)
            depths = plan.describe()
            # Only batch-choosing policies set it; the others' lines stay as they were.
            batch = "" if decision.worker_batch is None else f" batch={decision.worker_batch}"
            return f"{at:.3f} start {job_id} plan={depths}{batch} gpus={gpus} ({reason})"
        case Preempt(job_id=job_id, reason=reason, by=by):
            return f"{at:.3f} preempt {job_id} by={by or '-'} ({reason})"
        case Replan(job_id=job_id, placement=placement, plan=plan, reason=reason):
            gpus = " ".join(f"{n}:{g}" for n, g in placement)
            depths = plan.describe()
            return f"{at:.3f} replan {job_id} plan={depths} gpus={gpus} ({reason})"
        case Resize(job_id=job_id, placement=placement, plan=plan, worker_batch=batch):
            gpus = " ".join(f"{n}:{g}" for n, g in placement)
            return (
                f"{at:.3f} resize {job_id} plan={plan.describe()} batch={batch} gpus={gpus} "
                f"({decision.reason})"
            )
    raise TypeError(f"not a decision: {decision!r}")


_KINDS: dict[type, str] = {Start: "start", Preempt: "preempt", Replan: "replan", Resize: "resize"}
"""The word each decision's line begins with after its time (what ``counts`` counts)."""


class DecisionLog:
    def __init__(self, *, keep_lines: bool = False) -> None:
        self._hash = hashlib.sha256()
        self.lines: list[str] | None = [] if keep_lines else None
        self.counts = {"start": 0, "preempt": 0, "replan": 0, "resize": 0}
        self.packed_starts = 0

    def record(self, at: float, decision: Decision) -> None:
        line = describe(at, decision)
        self._hash.update(line.encode())
        self._hash.update(b"\n")
        kind = _KINDS[type(decision)]
        self.counts[kind] += 1
        if kind == "start" and "packed" in decision.reason:
            self.packed_starts += 1
        if self.lines is not None:
            self.lines.append(line)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

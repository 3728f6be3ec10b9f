"""Fit the resize-cost prior the jigsaw policy prices a resize with, before it has measured one
(:class:`jigsaw.policies.jigsaw_parts.resize_cost.ResizeCostPrior`), to the measured table of
``bench/runtime_resize.py``: ``resize_s = floor_s + s_per_gb x checkpoint GB + control_every x
iteration_s`` (the stop waits up to one control interval), least squares on floor and slope.

    python -m bench.resize_cost_fit [bench/results/runtime_resize.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/runtime_resize.json")
    table = json.loads(path.read_text())
    rows = table["resizes"]
    per_lease, control = table["lease_iterations"], table["control_every"]
    gb = np.array([row["checkpoint_bytes"] / 1e9 for row in rows])
    waited = np.array([control * row["first_lease_s"] / per_lease for row in rows])
    seconds = np.array([row["resize_s"] for row in rows])
    design = np.column_stack([np.ones_like(gb), gb])
    (floor_s, s_per_gb), *_ = np.linalg.lstsq(design, seconds - waited, rcond=None)
    predicted = floor_s + s_per_gb * gb + waited
    print(
        json.dumps(
            {
                "benchmark": "resize_cost_fit",
                "source": str(path),
                "floor_s": round(float(floor_s), 2),
                "s_per_gb": round(float(s_per_gb), 1),
                "control_every": control,
                "rows": [
                    {
                        "model": row["model"],
                        "resize": f"{row['from_workers']} -> {row['to_workers']}",
                        "measured_s": row["resize_s"],
                        "prior_s": round(float(p), 1),
                    }
                    for row, p in zip(rows, predicted, strict=True)
                ],
                "mean_abs_error_s": round(float(np.mean(np.abs(predicted - seconds))), 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

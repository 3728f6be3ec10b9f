"""Add what pipeline and hybrid predictions need to the shipped block profiles.

For each model, every block of ``jigsaw/data/profiles/<model>.json`` gets
``output_bytes_per_sample`` (what a pipeline stage boundary sends, FP32) and ``linear_layers``
(the nn.Linear layers a hybrid plan can shard: in/out features, bias). Times and FLOPs are left
as the profiler wrote them. The control plane reads these fields without torch
(:func:`jigsaw.oracle.parallel_profile.parallel_profile_of`); a profile without them has data
parallelism as its only plan type.

    python -m bench.parallel_profile_fields [--models mlp vgg16_32_fc ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from worker.parallel_profile import linear_layers, output_bytes_per_sample
from worker.zoo import load_workload

PROFILES = Path(__file__).resolve().parent.parent / "jigsaw" / "data" / "profiles"


def augment(model: str) -> None:
    path = PROFILES / f"{model}.json"
    document = json.loads(path.read_text())
    workload = load_workload(model)
    outputs = output_bytes_per_sample(workload)
    layers = linear_layers(workload)
    if len(outputs) != len(document["blocks"]):
        listed = len(document["blocks"])
        raise SystemExit(f"{model}: {len(outputs)} blocks built, the profile lists {listed}")
    for block, out in zip(document["blocks"], outputs, strict=True):
        block["output_bytes_per_sample"] = out
        block["linear_layers"] = [
            {
                "in_features": layer.in_features,
                "out_features": layer.out_features,
                "bias": layer.bias,
            }
            for layer in layers
            if layer.block == block["index"]
        ]
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"{model}: outputs {outputs}, {len(layers)} linear layers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shipped = sorted(p.stem for p in PROFILES.glob("*.json"))
    parser.add_argument("--models", nargs="*", default=shipped)
    for model in parser.parse_args().models:
        augment(model)


if __name__ == "__main__":
    main()

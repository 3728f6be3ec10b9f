"""Per-model block profiles: FLOPs, parameter bytes and saved activations of each SPB block.

A *measured* profile is ``jigsaw/data/profiles/<model>.json``, written by the worker's
profiler (torch) and read by :class:`jigsaw.oracle.profile_catalog.ProfileCatalog`. Until one exists
for a model, an *analytic default* is used: a published whole-model FLOP and parameter count,
split across blocks by a documented rule (see docs/ORACLE.md, "Model profiles"). Every
profile says which of the two it is in ``source``.

Conventions: FLOPs count one multiply-add as two FLOPs; backward costs 2x forward; bytes are
FP32 (4 bytes per parameter or activation value).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jigsaw.model.errors import InvalidSpecError

MEASURED = "measured"
ANALYTIC = "analytic default"

ZOO_MODELS = (
    "mlp",
    "digits_cnn",
    "resnet18_32",
    "resnet18_224",
    "resnet50_32",
    "resnet50_224",
    "vgg16_32",
    "vgg16_224",
    "gpt_small",
    "vgg16_32_fc",
    "digits_wide_mlp",
)
POLLUX_APPS = ("cifar10", "imagenet", "bert", "deepspeech2", "ncf", "yolov3")

# Pollux applications and Gavel job types -> profile name (docs/ORACLE.md, "Aliases").
ALIASES: dict[str, str] = {
    "cifar10": "resnet18_32",
    "imagenet": "resnet50_224",
    "resnet-18": "resnet18_32",  # Gavel's ResNet-18 trains on CIFAR-10
    "resnet-50": "resnet50_224",  # Gavel's ResNet-50 trains on ImageNet
    "transformer": "gpt_small",  # Gavel: Transformer translation (Multi30k)
    "lm": "gpt_small",  # Gavel: LSTM language model (Wikitext-2); nearest zoo LM
    "recommendation": "mlp",  # Gavel: autoencoder recommender (ML-20M), fully connected
    "cyclegan": "resnet18_224",  # ResNet-style generators on 256x256 images
    "a3c": "digits_cnn",  # small CNN policy on Atari frames
}

_GAVEL_JOB_TYPE = re.compile(r"^\s*(?P<name>[^()]+?)\s*(\(batch size (?P<bsz>\d+)\))?\s*$")


@dataclass(frozen=True, slots=True)
class BlockProfile:
    index: int
    name: str
    forward_flops_per_sample: float
    backward_flops_per_sample: float
    param_bytes: int
    activation_bytes_per_sample: int
    forward_time_s_per_sample: float | None = None
    backward_time_s_per_sample: float | None = None
    output_bytes_per_sample: int | None = None
    """The block's output, FP32 (what a pipeline stage boundary sends); ``None`` when the
    profile does not say (then the model has data parallelism as its only plan type)."""
    linear_layers: tuple[tuple[int, int, bool], ...] = ()
    """The block's nn.Linear layers as (in_features, out_features, bias): what a hybrid plan
    can shard."""


@dataclass(frozen=True, slots=True)
class ModelProfile:
    model: str
    blocks: tuple[BlockProfile, ...]
    source: str
    """``"measured"`` (a profiler file) or ``"analytic default"`` (published counts)."""
    default_batch_size: int
    device: str | None = None
    provenance: str = ""
    train_samples: int | None = None
    """Samples in the training split the workers build for this model (``None``: not
    recorded): one iteration's global batch can never be larger."""

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def param_bytes(self) -> int:
        return sum(b.param_bytes for b in self.blocks)

    def has_times_for(self, hardware_name: str) -> bool:
        """Measured per-sample times exist and were taken on this kind of device."""
        if self.device is None or not self.device.lower().startswith(hardware_name.lower()):
            return False
        return all(
            b.forward_time_s_per_sample is not None and b.backward_time_s_per_sample is not None
            for b in self.blocks
        )


@dataclass(frozen=True, slots=True)
class _AnalyticSpec:
    forward_gflops: float  # per sample, 2 FLOPs per multiply-add
    params_millions: float
    activation_mb: float  # saved activations per sample, FP32, MB = 1e6 bytes
    flop_split: tuple[float, ...]
    param_split: tuple[float, ...]
    activation_split: tuple[float, ...]
    default_batch_size: int
    source: str


_CNN_FLOPS = (0.25, 0.25, 0.25, 0.25)  # ResNet stages: ~equal FLOPs by design
_CNN_PARAMS = (1 / 85, 4 / 85, 16 / 85, 64 / 85)  # channels double per stage: params x4
_CNN_ACTS = (8 / 15, 4 / 15, 2 / 15, 1 / 15)  # spatial /4, channels x2: activations /2
_TRANSFORMER_FLOPS = (0.23, 0.23, 0.23, 0.31)  # equal layers; output head in block 4
_TRANSFORMER_ACTS = (0.24, 0.24, 0.24, 0.28)

_ANALYTIC: dict[str, _AnalyticSpec] = {
    "mlp": _AnalyticSpec(
        0.0000845,
        0.0426,
        0.002,
        (0.195, 0.388, 0.388, 0.029),
        (0.195, 0.387, 0.387, 0.031),
        (0.25, 0.25, 0.25, 0.25),
        64,
        "docs/MODELS.md: 64-128-128-128-10 MLP on sklearn digits, one Linear per block",
    ),
    "digits_cnn": _AnalyticSpec(
        0.00127,
        0.058,
        0.03,
        (0.015, 0.465, 0.465, 0.055),
        (0.003, 0.08, 0.32, 0.597),
        (0.4, 0.35, 0.2, 0.05),
        64,
        "docs/MODELS.md: conv1 | conv2+pool | conv3+pool | classifier on 1x8x8 digits",
    ),
    "resnet18_32": _AnalyticSpec(
        1.11,
        11.17,
        5.0,
        _CNN_FLOPS,
        _CNN_PARAMS,
        _CNN_ACTS,
        128,
        "CIFAR ResNet-18: 0.556 GMACs, 11.17M params (He et al. 2016; kuangliu/pytorch-cifar)",
    ),
    "resnet18_224": _AnalyticSpec(
        3.64,
        11.69,
        40.0,
        _CNN_FLOPS,
        _CNN_PARAMS,
        _CNN_ACTS,
        64,
        "torchvision ResNet-18@224: 1.82 GMACs, 11.69M params",
    ),
    "resnet50_32": _AnalyticSpec(
        2.60,
        23.52,
        25.0,
        _CNN_FLOPS,
        _CNN_PARAMS,
        _CNN_ACTS,
        128,
        "CIFAR ResNet-50 (3x3 stem, no max-pool): 1.30 GMACs, 23.5M params",
    ),
    "resnet50_224": _AnalyticSpec(
        8.2,
        25.56,
        100.0,
        _CNN_FLOPS,
        _CNN_PARAMS,
        _CNN_ACTS,
        32,
        "torchvision ResNet-50@224: 4.1 GMACs, 25.56M params",
    ),
    "vgg16_32": _AnalyticSpec(
        0.627,
        14.7,
        3.0,
        (0.127, 0.181, 0.302, 0.302, 0.088),
        (0.003, 0.015, 0.100, 0.401, 0.481),
        (0.5, 0.25, 0.13, 0.08, 0.04),
        128,
        "VGG-16-BN on 32x32: 0.313 GMACs, 14.7M params; one conv stage per block",
    ),
    "vgg16_224": _AnalyticSpec(
        30.9,
        138.4,
        110.0,
        (0.125, 0.179, 0.299, 0.299, 0.098),
        (0.0003, 0.0016, 0.0107, 0.0426, 0.9448),
        (0.45, 0.25, 0.16, 0.09, 0.05),
        32,
        "torchvision VGG-16@224: 15.5 GMACs, 138.4M params; conv stages 1-5, fc in block 5",
    ),
    "gpt_small": _AnalyticSpec(
        0.114,
        0.87,
        3.6,
        _TRANSFORMER_FLOPS,
        (0.274, 0.226, 0.226, 0.274),
        _TRANSFORMER_ACTS,
        32,
        "docs/MODELS.md: 4-layer byte-level GPT (d=128, 64 tokens, 0.87M params), "
        "one layer per block",
    ),
    "bert": _AnalyticSpec(
        68.0,
        109.5,
        660.0,
        _TRANSFORMER_FLOPS,
        (0.412, 0.196, 0.196, 0.196),
        _TRANSFORMER_ACTS,
        12,
        "BERT-base fine-tuning on SQuAD at 384 tokens (Pollux 'bert'): 110M params",
    ),
    "deepspeech2": _AnalyticSpec(
        35.0,
        86.7,
        300.0,
        (0.30, 0.30, 0.27, 0.13),
        (0.003, 0.415, 0.388, 0.194),
        (0.4, 0.25, 0.23, 0.12),
        20,
        "DeepSpeech2 (2 conv + 5 bi-LSTM x 1024, deepspeech.pytorch defaults); FLOPs rough",
    ),
    "ncf": _AnalyticSpec(
        0.00002,
        0.40,
        0.002,
        (0.1, 0.45, 0.4, 0.05),
        (0.97, 0.02, 0.009, 0.001),
        (0.5, 0.3, 0.15, 0.05),
        256,
        "NeuMF (GMF + MLP 64-32-16-8, factor 8) on MovieLens-1M; embeddings in block 1",
    ),
    "yolov3": _AnalyticSpec(
        65.9,
        61.9,
        400.0,
        (0.25, 0.25, 0.25, 0.25),
        (0.08, 0.57, 0.25, 0.10),
        _CNN_ACTS,
        8,
        "YOLOv3-416 (Darknet-53): 65.9 GFLOPs, 61.9M params (Redmon & Farhadi 2018)",
    ),
}

ANALYTIC_MODELS = tuple(_ANALYTIC)


def canonical_name(name: str) -> tuple[str, int | None]:
    """Resolve a zoo name, Pollux app or Gavel job type to a profile name.

    Returns the profile name and the batch size embedded in a Gavel job type, if any
    (``"ResNet-50 (batch size 64)"`` -> ``("resnet50_224", 64)``).
    """
    key = name.strip().lower()
    if key in _ANALYTIC or key in ALIASES:
        return ALIASES.get(key, key), None
    match = _GAVEL_JOB_TYPE.match(key)
    if match is not None and match.group("name") in ALIASES:
        batch = match.group("bsz")
        return ALIASES[match.group("name")], int(batch) if batch else None
    return key, None


def analytic_profile(model: str) -> ModelProfile:
    spec = _ANALYTIC.get(model)
    if spec is None:
        raise InvalidSpecError(
            f"no profile for model {model!r}: known models are {', '.join(ANALYTIC_MODELS)} "
            "(or add jigsaw/data/profiles/<model>.json)",
            field="model",
        )
    blocks = tuple(
        BlockProfile(
            index=i + 1,
            name=f"block{i + 1}",
            forward_flops_per_sample=spec.forward_gflops * 1e9 * spec.flop_split[i],
            backward_flops_per_sample=2.0 * spec.forward_gflops * 1e9 * spec.flop_split[i],
            param_bytes=round(4 * spec.params_millions * 1e6 * spec.param_split[i]),
            activation_bytes_per_sample=round(spec.activation_mb * 1e6 * spec.activation_split[i]),
        )
        for i in range(len(spec.flop_split))
    )
    return ModelProfile(model, blocks, ANALYTIC, spec.default_batch_size, None, spec.source)


def analytic_default_batch(model: str) -> int | None:
    """The per-worker batch the analytic default for ``model`` assumes; None when there is
    no analytic default for it."""
    spec = _ANALYTIC.get(model)
    return None if spec is None else spec.default_batch_size

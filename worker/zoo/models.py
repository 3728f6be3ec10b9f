"""Importing this module registers every zoo model."""

from worker.zoo import gpt, resnet, small, vgg, vgg_fc

__all__ = ["gpt", "resnet", "small", "vgg", "vgg_fc"]

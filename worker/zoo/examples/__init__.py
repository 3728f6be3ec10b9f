"""Example user entrypoints (see docs/MODELS.md)."""

"""JigSaw's pure core: domain model, lifecycle, seams, scheduling cycle, policies.

Nothing in this package imports FastAPI, SQLAlchemy, Ray, torch, or the ``api``/``worker``
layers; ``tests/test_dependency_rule.py`` enforces that.
"""

__version__ = "0.1.0"

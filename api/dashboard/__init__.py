"""The read-only web dashboard at ``/`` (see routes.py for how it authenticates)."""

from api.dashboard.routes import router

__all__ = ["router"]

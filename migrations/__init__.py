"""Alembic migrations for the control plane's schema (see ``api/migrate.py``)."""

"""The SQL store (the core's ``Store`` seam) and the service's other persistent records."""

from api.store.errors import StaleEpochError
from api.store.sql_store import SqlStore

__all__ = ["SqlStore", "StaleEpochError"]

"""Items kept sorted by unique keys, as two lists in step: insert, replace and remove by
bisection, so a reader takes the lists as they stand and never sorts."""

from __future__ import annotations

import bisect
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Any)  # any key with a total order; keys are unique
V = TypeVar("V")


class SortedPairs(Generic[K, V]):
    __slots__ = ("items", "keys")

    def __init__(self) -> None:
        self.keys: list[K] = []
        self.items: list[V] = []

    def __len__(self) -> int:
        return len(self.items)

    def insert(self, key: K, item: V) -> None:
        """Adds ``item`` under ``key``, which must not be there yet."""
        index = bisect.bisect_left(self.keys, key)
        self.keys.insert(index, key)
        self.items.insert(index, item)

    def put(self, key: K, item: V) -> None:
        """Adds ``item`` under ``key``, or replaces the item already there in place."""
        keys = self.keys
        index = bisect.bisect_left(keys, key)
        if index < len(keys) and keys[index] == key:
            self.items[index] = item
        else:
            keys.insert(index, key)
            self.items.insert(index, item)

    def remove(self, key: K) -> None:
        """Drops the item under ``key`` (a KeyError if there is none)."""
        keys = self.keys
        index = bisect.bisect_left(keys, key)
        if index == len(keys) or keys[index] != key:
            raise KeyError(key)
        del keys[index]
        del self.items[index]

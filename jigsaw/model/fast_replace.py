"""``dataclasses.replace`` compiled for one frozen dataclass, three times faster.

Every state change, progress report and version bump copies a
:class:`~jigsaw.model.domain.Job` (a replay of the full Philly trace copies one 2.6 million
times), and the generic ``replace`` walks the fields' metadata and calls ``__init__`` with
keywords on each copy. :func:`compiled_replace` writes one straight-line function from the
class's own field list, so it cannot drift from the class; its copy equals ``replace``'s
for a class without ``__post_init__`` whose fields are all ``__init__`` fields (it refuses
any other, tests/core/domain/test_fast_replace.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def compiled_replace(cls: type[T]) -> Callable[..., T]:
    """``replace(instance, **changes)`` for instances of ``cls`` (exactly ``cls``)."""
    if not is_dataclass(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: only a dataclass without __post_init__ is supported")
    names = tuple(f.name for f in fields(cls))
    if not all(f.init for f in fields(cls)):
        raise TypeError(f"{cls.__name__}: every field must be an __init__ field")
    known = frozenset(names)
    # Each field is copied through its own slot (or attribute) descriptor's setter, bound
    # once here, then the changes are written over it: no per-field name lookup and no
    # ``changes.get`` per field on the hot path.
    lines = ["def copy(instance, changes):", "    new = new_object(cls)"]
    lines += [f"    set_{name}(new, instance.{name})" for name in names]
    lines += ["    for name, value in changes.items():", "        set_field(new, name, value)"]
    lines.append("    return new")
    namespace: dict[str, Any] = {
        "cls": cls,
        "new_object": object.__new__,
        "set_field": object.__setattr__,  # a frozen class's own __setattr__ refuses
    }
    namespace.update({f"set_{name}": _setter(cls, name) for name in names})
    exec("\n".join(lines), namespace)  # the source is built above from the field names
    copy: Callable[[T, dict[str, Any]], T] = namespace["copy"]

    def replace(instance: T, /, **changes: Any) -> T:
        if not known.issuperset(changes):
            unknown = ", ".join(sorted(set(changes) - known))
            raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
        return copy(instance, changes)

    replace.__doc__ = f"``dataclasses.replace`` for {cls.__name__} (:func:`compiled_replace`)."
    return replace


def _setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The function that writes field ``name`` of a ``cls`` instance, bypassing a frozen
    class's ``__setattr__``: the slot's descriptor where the class has slots."""
    descriptor = cls.__dict__.get(name)
    if descriptor is not None and hasattr(descriptor, "__set__"):
        setter: Callable[[Any, Any], None] = descriptor.__set__
        return setter
    return lambda instance, value: object.__setattr__(instance, name, value)

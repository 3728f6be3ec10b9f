"""``dataclasses.replace`` and a frozen dataclass's constructor, compiled for one class:
two to three times faster.

Every state change, progress report and version bump copies a
:class:`~jigsaw.model.domain.Job` (a replay of the full Philly trace under las copies one
1.3 million times) and records a :class:`~jigsaw.model.domain.JobEvent`. The generic
``replace`` walks the fields' metadata and calls ``__init__`` with keywords on each copy, and
a frozen class's ``__init__`` sets each field through ``object.__setattr__`` by name.
:func:`compiled_replace` (and :func:`compiled_copy`, the same with the changes in a dict)
and :func:`compiled_new` write one straight-line function from the class's own field list,
so they cannot drift from the class; what they build equals what ``replace`` and the class
build, for a class without ``__post_init__`` whose fields are all ``__init__`` fields (they
refuse any other, tests/core/domain/test_fast_replace.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def compiled_replace(cls: type[T]) -> Callable[..., T]:
    """``replace(instance, **changes)`` for instances of ``cls`` (exactly ``cls``)."""
    copy, known = _compile(cls)

    def replace(instance: T, /, **changes: Any) -> T:
        if not known.issuperset(changes):
            _refuse(cls, changes, known)
        return copy(instance, changes)

    replace.__doc__ = f"``dataclasses.replace`` for {cls.__name__} (:func:`compiled_replace`)."
    return replace


def compiled_copy(cls: type[T]) -> Callable[[T, dict[str, Any]], T]:
    """``copy(instance, changes)``: :func:`compiled_replace` with the changes in a dict the
    caller has built (it is read, not kept), for a caller that would otherwise unpack its
    own dict into keywords only to have them packed again."""
    copy, known = _compile(cls)

    def copy_with(instance: T, changes: dict[str, Any], /) -> T:
        if not known.issuperset(changes):
            _refuse(cls, changes, known)
        return copy(instance, changes)

    copy_with.__doc__ = (
        f"A {cls.__name__} with ``changes`` written over it (:func:`compiled_copy`)."
    )
    return copy_with


def compiled_new(cls: type[T]) -> Callable[..., T]:
    """``cls(*values)`` with every field given, in field order, written straight into its
    slot: a frozen dataclass's ``__init__`` goes through ``object.__setattr__`` by name for
    each field, about twice the cost (the cycle records an event on every state change)."""
    names = _field_names(cls)
    lines = [f"def new({', '.join(names)}):", "    made = new_object(cls)"]
    lines += [f"    set_{name}(made, {name})" for name in names]
    lines.append("    return made")
    namespace: dict[str, Any] = {"cls": cls, "new_object": object.__new__}
    namespace.update({f"set_{name}": _setter(cls, name) for name in names})
    exec("\n".join(lines), namespace)  # the source is built above from the field names
    new: Callable[..., T] = namespace["new"]
    new.__doc__ = f"``{cls.__name__}(*values)``, every field given (:func:`compiled_new`)."
    return new


def _compile(cls: type[T]) -> tuple[Callable[[T, dict[str, Any]], T], frozenset[str]]:
    """The straight-line copy of a ``cls`` instance with changes, and ``cls``'s field names."""
    names = _field_names(cls)
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
    return copy, frozenset(names)


def _field_names(cls: type) -> tuple[str, ...]:
    """``cls``'s fields in order, for a class whose instances these functions build exactly
    as its ``__init__`` would (TypeError for any other)."""
    if not is_dataclass(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: only a dataclass without __post_init__ is supported")
    if not all(f.init for f in fields(cls)):
        raise TypeError(f"{cls.__name__}: every field must be an __init__ field")
    return tuple(f.name for f in fields(cls))


def _refuse(cls: type, changes: dict[str, Any], known: frozenset[str]) -> None:
    unknown = ", ".join(sorted(set(changes) - known))
    raise TypeError(f"{cls.__name__} has no field(s) {unknown}")


def _setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The function that writes field ``name`` of a ``cls`` instance, bypassing a frozen
    class's ``__setattr__``: the slot's descriptor where the class has slots."""
    descriptor = cls.__dict__.get(name)
    if descriptor is not None and hasattr(descriptor, "__set__"):
        setter: Callable[[Any, Any], None] = descriptor.__set__
        return setter
    return lambda instance, value: object.__setattr__(instance, name, value)

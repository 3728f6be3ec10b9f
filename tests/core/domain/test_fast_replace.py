"""The compiled ``replace`` copies a Job exactly as ``dataclasses.replace`` does, and the
compiled constructor builds a JobEvent exactly as the class does."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from jigsaw.model.domain import Job, JobEvent, JobSpec, replace_job
from jigsaw.model.fast_replace import compiled_copy, compiled_new, compiled_replace
from jigsaw.model.lifecycle import JobState


def _job() -> Job:
    return Job("j-1", JobSpec("train", "resnet50", 2, 100), submitted_at=5.0)


def test_a_copy_equals_dataclasses_replace_and_leaves_the_original() -> None:
    job = _job()
    changes = {"state": JobState.RUNNING, "version": 3, "placement": ((0, 0), (0, 1))}
    copied = replace_job(job, **changes)
    assert copied == replace(job, **changes)
    assert copied is not job
    assert job.version == 0 and job.placement == ()


def test_a_copy_without_changes_is_a_new_equal_object() -> None:
    job = _job()
    assert replace_job(job) == job and replace_job(job) is not job


def test_an_unknown_field_is_refused_as_dataclasses_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field"):
        replace_job(_job(), not_a_field=1)
    with pytest.raises(TypeError, match="no field"):
        compiled_copy(Job)(_job(), {"state": JobState.RUNNING, "not_a_field": 1})


def test_a_copy_from_a_dict_equals_the_copy_from_keywords_and_keeps_the_dict() -> None:
    job = _job()
    changes = {"state": JobState.RUNNING, "version": 3, "reason": "started"}
    copied = compiled_copy(Job)(job, changes)
    assert copied == replace_job(job, **changes) and copied is not job
    assert changes == {"state": JobState.RUNNING, "version": 3, "reason": "started"}


def test_the_compiled_constructor_builds_what_the_class_builds() -> None:
    values = ("j-1", JobState.PENDING, JobState.RUNNING, "all workers up", 7.5, "executor", "")
    made = compiled_new(JobEvent)(*values)
    assert type(made) is JobEvent and made == JobEvent(*values)
    assert [getattr(made, name) for name in JobEvent.__slots__] == list(values)
    with pytest.raises(TypeError):
        compiled_new(JobEvent)(*values[:-1])  # every field is given, defaults or not


def test_classes_it_cannot_copy_exactly_are_refused() -> None:
    @dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class Derived:
        value: int
        double: int = field(init=False, default=0)

    for compile_for in (compiled_replace, compiled_copy, compiled_new):
        with pytest.raises(TypeError):
            compile_for(Checked)
        with pytest.raises(TypeError):
            compile_for(Derived)

"""HiGHS prints a debug line to the process's standard output on some problems; while the
allocator solves, whatever C code prints there goes to standard error instead, so
``jigsaw-cli simulate -o json`` stays parseable."""

from __future__ import annotations

import ctypes
import os

import pytest

from jigsaw.policies.allocator.solve import _solver_prints_to_stderr


def test_c_printf_while_solving_lands_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    libc = ctypes.CDLL(None)
    with _solver_prints_to_stderr():
        libc.printf(b"from C while solving\n")  # buffered by C's stdio, flushed on the way out
        os.write(1, b"from fd 1 while solving\n")
    print("after solving", flush=True)
    out, err = capfd.readouterr()
    assert out == "after solving\n"
    assert "from C while solving" in err and "from fd 1 while solving" in err


def test_standard_output_is_given_back_when_the_solver_raises(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(RuntimeError), _solver_prints_to_stderr():
        raise RuntimeError("the solver failed")
    os.write(1, b"still stdout\n")
    out, _ = capfd.readouterr()
    assert out == "still stdout\n"

"""Fixtures for the SPB engine and zoo tests."""

from __future__ import annotations

from typing import Any

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too so this directory also runs on its own under --strict-markers.
    config.addinivalue_line("markers", "slow: takes more than ~20 s")
    config.addinivalue_line("markers", "distributed: spawns real torch.distributed processes")


@pytest.fixture(autouse=True)
def _single_intra_op_thread() -> None:
    # Thread-simulated ranks and spawned ranks share two cores; more threads only thrash.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def spb_gloo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """The SPB runs on real gloo processes, all in one spawn (tests/worker/spb_gloo.py)."""
    from tests.worker.spb_gloo import run_all

    return run_all(tmp_path_factory.mktemp("spb-gloo"))

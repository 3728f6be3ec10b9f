"""Fixtures for the SPB engine and zoo tests."""

from __future__ import annotations

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

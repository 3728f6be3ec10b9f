"""Thread-simulated ranks share torch's global RNG: a rank drawing an example input while a
peer draws its initial weights must not shift those weights (a CI flake of the pipeline's
checkpoint test came from exactly that: one replica of a stage started from other weights)."""

from __future__ import annotations

import threading

import torch

from worker.zoo import load_workload


def test_example_inputs_drawn_by_a_peer_thread_leave_initial_weights_alone() -> None:
    reference = [p.detach().clone() for p in load_workload("mlp", seed=5).parameters()]
    drawer = load_workload("mlp", seed=1)
    stop = threading.Event()

    def draw_example_inputs() -> None:
        while not stop.is_set():
            drawer.example_input(8)

    peer = threading.Thread(target=draw_example_inputs)
    peer.start()
    try:
        builds = [load_workload("mlp", seed=5) for _ in range(30)]
    finally:
        stop.set()
        peer.join()
    for build in builds:
        for got, want in zip(build.parameters(), reference, strict=True):
            assert torch.equal(got, want)


def test_example_inputs_are_reproducible() -> None:
    workload = load_workload("digits_cnn", seed=0)
    torch.manual_seed(123)
    first = workload.example_input(4)
    torch.manual_seed(456)
    assert torch.equal(first, workload.example_input(4))

"""The batch-size controller's math on synthetic timings."""

from __future__ import annotations

import math

import pytest

from langgraph_combee import BatchSizeController
from langgraph_combee._algorithm.controller import choose_batch_size, fit_power_law
from langgraph_combee._errors import ConfigurationError


def test_fit_recovers_exact_power_law() -> None:
    samples = [(bs, 12.0 * bs**-0.8) for bs in (4, 8, 16, 32)]
    fit = fit_power_law(samples)
    assert fit.a == pytest.approx(12.0)
    assert fit.alpha == pytest.approx(0.8)


def test_choice_matches_closed_form() -> None:
    a, alpha = 30.0, 1.0
    samples = [(bs, a * bs**-alpha) for bs in (10, 20, 40)]
    tau = 0.016 * alpha * a * 10 ** (-alpha - 1)
    expected = math.floor((alpha * a / tau) ** (1 / (alpha + 1)))
    assert choose_batch_size(samples, max_size=1000) == expected == 79


def test_choice_is_clamped() -> None:
    samples = [(bs, 30.0 / bs) for bs in (10, 20, 40)]
    assert choose_batch_size(samples, max_size=50) == 50
    assert choose_batch_size(samples, min_size=100, max_size=200) == 100


def test_no_saving_means_the_smallest_batch_measured() -> None:
    # Time per trace grows with the batch: nothing says a batch below 4 is faster.
    samples = [(4, 1.0), (8, 1.2), (16, 1.5)]
    assert choose_batch_size(samples, min_size=1) == 4
    assert choose_batch_size(samples, min_size=6) == 6
    assert choose_batch_size(samples, min_size=1, max_size=3) == 3


def test_bad_inputs_name_the_value() -> None:
    with pytest.raises(ConfigurationError, match="two distinct"):
        fit_power_law([(4, 1.0), (4, 2.0)])
    with pytest.raises(ConfigurationError, match=r"\(0.0, -1.0\)"):
        fit_power_law([(0, -1.0), (4, 1.0)])
    with pytest.raises(ConfigurationError, match="tau_fraction"):
        choose_batch_size([(4, 1.0), (8, 0.5)], tau_fraction=2.0)
    with pytest.raises(ConfigurationError, match="candidates"):
        BatchSizeController(candidates=(8,))


def test_controller_profiles_each_candidate_then_serves_the_choice() -> None:
    controller = BatchSizeController(candidates=(4, 8, 16), max_size=500)
    served = []
    for _ in range(3):
        bs = controller.next_size()
        served.append(bs)
        # A step's delay barely grows with batch size (LLM-bound, parallel map).
        controller.record(bs, 10.0 + 0.01 * bs)
    assert served == [4, 8, 16]
    assert not controller.profiling
    chosen = controller.next_size()
    per_trace = [(bs, (10.0 + 0.01 * bs) / bs) for bs in (4, 8, 16)]
    assert chosen == choose_batch_size(per_trace, max_size=500)
    assert 16 < chosen < 500
    controller.record(chosen, 99.0)
    assert controller.next_size() == chosen

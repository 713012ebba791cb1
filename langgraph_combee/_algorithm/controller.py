"""The batch-size controller: pick the batch size from measured delay alone.

Profile one learning step at a few batch sizes, convert each measured step delay
into time per trace, ``T(bs) = seconds / bs``, fit ``T(bs) = A * bs^(-alpha)`` by
least squares in log-log space, and choose the largest batch size whose marginal
saving is still worth it: ``bs* = (alpha * A / tau) ^ (1 / (alpha + 1))`` where
``tau`` is a fraction (1.6% by default) of the steepest measured slope, i.e. the
slope at the smallest profiled batch size. The result is clamped to [min, max].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from langgraph_combee._errors import ConfigurationError

DEFAULT_CANDIDATES: tuple[int, ...] = (4, 8, 16, 32)
DEFAULT_TAU_FRACTION = 0.016


@dataclass(frozen=True)
class PowerLawFit:
    """``T(bs) = A * bs^(-alpha)`` fitted to (batch size, time per trace) samples."""

    a: float
    alpha: float

    def slope(self, bs: float) -> float:
        """Magnitude of dT/dbs at ``bs``."""
        return float(self.alpha * self.a * bs ** (-self.alpha - 1))


def fit_power_law(samples: Sequence[tuple[float, float]]) -> PowerLawFit:
    """Fit ``T = A * bs^(-alpha)`` to ``(bs, T)`` samples (least squares on logs).

    Raises:
        ConfigurationError: fewer than two distinct positive batch sizes, or a
            non-positive time.
    """
    points = [(float(bs), float(t)) for bs, t in samples]
    for bs, t in points:
        if bs <= 0 or t <= 0:
            raise ConfigurationError("sample", (bs, t), "positive batch size and time")
    if len({bs for bs, _ in points}) < 2:
        raise ConfigurationError("samples", samples, "at least two distinct batch sizes")
    xs = [math.log(bs) for bs, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return PowerLawFit(a=math.exp(my - slope * mx), alpha=-slope)


def choose_batch_size(
    samples: Sequence[tuple[float, float]],
    *,
    tau_fraction: float = DEFAULT_TAU_FRACTION,
    min_size: int = 1,
    max_size: int = 256,
) -> int:
    """Pick the batch size from ``(bs, time per trace)`` samples.

    When the fit shows that larger batches do not save time per trace
    (alpha <= 0), the smallest batch size measured is returned (at least
    ``min_size``): nothing measured says a smaller one would be faster, and
    every step has costs of its own. Seen on the 1.5B on 2 CPU cores, where
    parallel calls save nothing: the step fell to a batch of 1 for the 36
    traces left after profiling.
    """
    if not 0 < tau_fraction < 1:
        raise ConfigurationError("tau_fraction", tau_fraction, "a number in (0, 1)")
    if not 1 <= min_size <= max_size:
        raise ConfigurationError("min_size/max_size", (min_size, max_size), "1 <= min <= max")
    fit = fit_power_law(samples)
    smallest = min(bs for bs, _ in samples)
    if fit.alpha <= 0:
        return int(min(max_size, max(min_size, math.floor(smallest))))
    tau = tau_fraction * fit.slope(smallest)
    best = (fit.alpha * fit.a / tau) ** (1.0 / (fit.alpha + 1.0))
    return int(min(max_size, max(min_size, math.floor(best))))


@dataclass
class BatchSizeController:
    """Profiles candidate batch sizes on real steps, then serves the chosen size.

    Call ``next_size()`` before a step and ``record(bs, seconds)`` after it. The
    first steps use each candidate once (they still learn: profiling costs no
    extra LLM calls); from then on the fitted choice is served.
    """

    candidates: tuple[int, ...] = DEFAULT_CANDIDATES
    min_size: int = 1
    max_size: int = 128
    tau_fraction: float = DEFAULT_TAU_FRACTION
    samples: list[tuple[int, float]] = field(default_factory=list)
    chosen: int | None = None

    def __post_init__(self) -> None:
        if len(set(self.candidates)) < 2 or any(c < 1 for c in self.candidates):
            raise ConfigurationError(
                "candidates", self.candidates, "at least two distinct batch sizes >= 1"
            )
        if not 1 <= self.min_size <= self.max_size:
            raise ConfigurationError(
                "min_size/max_size", (self.min_size, self.max_size), "1 <= min <= max"
            )

    @property
    def profiling(self) -> bool:
        """True while some candidate has not been measured yet."""
        return self.chosen is None

    def next_size(self) -> int:
        """The batch size to use for the next step."""
        if self.chosen is not None:
            return self.chosen
        measured = {bs for bs, _ in self.samples}
        for candidate in self.candidates:
            if candidate not in measured:
                return candidate
        return self._choose()

    def record(self, batch_size: int, seconds: float) -> None:
        """Record how long a step of ``batch_size`` traces took."""
        if batch_size < 1 or seconds <= 0:
            return
        if self.chosen is None:
            self.samples.append((batch_size, seconds))
            if {bs for bs, _ in self.samples} >= set(self.candidates):
                self._choose()

    def _choose(self) -> int:
        per_trace = [(bs, seconds / bs) for bs, seconds in self.samples]
        self.chosen = choose_batch_size(
            per_trace,
            tau_fraction=self.tau_fraction,
            min_size=self.min_size,
            max_size=self.max_size,
        )
        return self.chosen

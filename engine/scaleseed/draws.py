"""Values drawn with fixed weights, the weights summed once (a seed draws millions of times)."""

from __future__ import annotations

import random
from bisect import bisect
from collections.abc import Iterable
from itertools import accumulate
from typing import Generic, TypeVar

T = TypeVar("T")


class Weighted(Generic[T]):
    def __init__(self, pairs: Iterable[tuple[T, float]]):
        pairs = list(pairs)
        self.values = [value for value, _ in pairs]
        self.cumulative = list(accumulate(weight for _, weight in pairs))

    def draw(self, rng: random.Random) -> T:
        return self.values[bisect(self.cumulative, rng.random() * self.cumulative[-1])]

    def only(self, keep) -> Weighted[T]:
        """The values `keep` accepts, with their weights."""
        weights = [b - a for a, b in zip([0.0, *self.cumulative], self.cumulative, strict=False)]
        return Weighted((v, w) for v, w in zip(self.values, weights, strict=True) if keep(v))

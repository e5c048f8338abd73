"""What some checkers' cases are made of, beyond arrays: a toy predictor (Chapter 15) and the
rebuilding of a torch generator. ``tools/grade.py`` sends a case to the fresh process that
judges an answer as a pickle, and this module is all of this package that process can import:
it holds no reference and no case.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["ToyPredict", "generator_from_state", "reduce_generator"]


class ToyPredict:
    """A bag-of-words classifier over a list of words: P(positive) = sigmoid(bias + sum of word
    weights); ``predict(words)`` -> (P(negative), P(positive))."""

    def __init__(self, weights: dict, bias: float = -0.2):
        self.weights, self.bias = dict(weights), float(bias)

    def __call__(self, words):
        z = self.bias + sum(self.weights.get(w, 0.0) for w in words)
        p = 1.0 / (1.0 + np.exp(-z))
        return np.array([1.0 - p, p])


def generator_from_state(state: torch.Tensor) -> torch.Generator:
    """A CPU generator in the given state (what a pickled generator becomes)."""
    generator = torch.Generator()
    generator.set_state(state)
    return generator


def reduce_generator(generator: torch.Generator):
    """How to pickle a CPU ``torch.Generator`` (which pickle cannot do by itself): its state."""
    return generator_from_state, (generator.get_state(),)

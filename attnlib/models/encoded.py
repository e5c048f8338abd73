"""What J&W's classifier's encoder returns, and which tokens are words: shared by the classifier
(:mod:`.classifier`) and its faster paths (:mod:`.fast_paths`), so that neither imports the other
back."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data import EOS, PAD, SOS

__all__ = ["Encoded", "real_token_mask"]


@dataclass
class Encoded:
    """Hidden states and what produced them."""

    hidden: torch.Tensor  # (B, T, H)
    mask: torch.Tensor  # (B, T) bool: real tokens (not SOS, EOS, PAD)
    embedded: torch.Tensor  # (B, T, E)
    lengths: torch.Tensor  # (B,) including SOS and EOS


def real_token_mask(tokens: torch.Tensor) -> torch.Tensor:
    """True on real tokens: not padding and not the <SOS>/<EOS> wrappers. (B, T) -> (B, T)."""
    return (tokens != PAD) & (tokens != SOS) & (tokens != EOS)

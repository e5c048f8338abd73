"""Gradient-weighted attention relevance (Chefer, Gur & Wolf 2021, "Generic Attention-model
Explainability for Interpreting Bi-Modal and Encoder-Decoder Transformers", ICCV, rules 5-6 for
self-attention): attention weighted by how much the explained output depends on it.

Raw attention says where a head looks, not whether that matters to the output; rollout multiplies
the layers' attention but treats every head alike. Chefer et al. weight each head's attention by
its gradient: for the explained class's logit ``s``, layer l's map is the mean over heads of the
positive part of ``grad_A s * A`` (an element-wise product), and the layers accumulate from the
bottom up with the identity for the residual stream::

    A-bar^l = E_h[(dA^l_h s * A^l_h)^+],    R = I,    R <- R + A-bar^l R   (l = 1 .. L)

The explanation is the [CLS] row of R with R[0, 0] set to 0 (their CLIP example's
``R[0, 1:]``). As in their code the gradient is of the class's *logit* (before the softmax); a
classifier with one logit for two classes (the book's, a fitted head) explains class 1 by that
logit z and class 0 by -z. The class explained is the predicted one.

It needs a layered model whose attention can be edited (:mod:`attnlib.models.heads`'
``edits``: both transformer families): every head's rows pass through an identity edit that keeps
them, so one forward and one backward pass give every head's gradient at once, on the full
graph (a head's gradient includes its effect through the later layers' attention). J&W's BiLSTM
has one attention and no layers to accumulate; there Chefer's rule reduces to gradient x
attention, which Chapter 3 covers.
"""
from __future__ import annotations

import torch

from ..models.protocol import Site, eval_mode, layer_shape, require_capability

__all__ = ["head_gradients", "accumulate_relevance", "attention_relevance", "relevance_cls", "explained_logit",
           "PASS_TOKENS"]


def explained_logit(logits: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """The logit of each row's predicted class, (B,): ``z`` or ``-z`` for a one-logit binary output."""
    predicted = probs.argmax(-1)
    if logits.shape[-1] == 1:
        return torch.where(predicted == 1, logits[:, 0], -logits[:, 0])
    return logits.gather(-1, predicted[:, None])[:, 0]


def head_gradients(model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(attention, its gradient), both (B, L, h, T, T): every head's rows in one forward pass, and the
    gradient of the predicted class's logit (:func:`explained_logit`) with respect to them."""
    require_capability(model, "layered", "gradient-weighted attention relevance")
    L, H = layer_shape(model)
    kept: dict = {}

    def keep(site):
        def edit(rows, key_mask):
            rows = rows.clone()  # this tensor is what the layers above read: its gradient is the head's
            kept[site] = rows
            return rows
        return edit

    sites = [Site(layer, head) for layer in range(L) for head in range(H)]
    with torch.enable_grad(), eval_mode(model):
        out = model(batch, edits={site: keep(site) for site in sites})
        score = explained_logit(out.logits, out.probs)
        grads = torch.autograd.grad(score.sum(), [kept[s] for s in sites])
    attention = torch.stack([kept[s].detach() for s in sites], 1)
    gradient = torch.stack(list(grads), 1)
    B, _, T, _ = attention.shape
    return attention.view(B, L, H, T, T), gradient.view(B, L, H, T, T)


def accumulate_relevance(attention: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    """Chefer et al.'s rules on given maps: ``attention`` and ``gradient`` (B, L, h, T, T) -> R (B, T, T),
    ``R = I``, then for each layer from the bottom ``R <- R + E_h[(gradient * attention)^+] R``."""
    if attention.ndim != 5 or attention.shape != gradient.shape or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention and gradient must both be (B, L, h, T, T), got {tuple(attention.shape)} and "
                         f"{tuple(gradient.shape)}")
    B, L, _, T, _ = attention.shape
    relevance = torch.eye(T, dtype=attention.dtype, device=attention.device).expand(B, T, T).clone()
    for layer in range(L):
        cam = (gradient[:, layer] * attention[:, layer]).clamp(min=0).mean(1)  # (B, T, T)
        relevance = relevance + cam @ relevance
    return relevance


def attention_relevance(model, batch) -> torch.Tensor:
    """R after the last layer, (B, T, T) (see the module docstring); 0 on padding."""
    return accumulate_relevance(*head_gradients(model, batch))


#: Tokens (rows x positions) of one forward and backward pass of :func:`relevance_cls` on token ids: the
#: backward pass keeps every layer's activations, which a pretrained model's width makes large.
PASS_TOKENS = 2**11


def relevance_cls(model, batch) -> torch.Tensor:
    """The explanation: R's [CLS] row with R[0, 0] = 0, (B, T) over every position. ``batch``: what the
    model reads; (B, T) token ids are run :data:`PASS_TOKENS` tokens at a time (the same numbers)."""
    if isinstance(batch, torch.Tensor) and batch.ndim == 2:
        step = max(1, PASS_TOKENS // max(1, batch.shape[1]))
        return torch.cat([_cls_row(model, batch[start:start + step]) for start in range(0, len(batch), step)])
    return _cls_row(model, batch)


def _cls_row(model, batch) -> torch.Tensor:
    row = attention_relevance(model, batch)[:, 0, :].clone()
    row[:, 0] = 0
    return row

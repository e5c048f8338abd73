"""Jain & Wallace's attention classifier: encoder -> attention -> linear decoder.

The model is split into the three steps every experiment in the book recombines:

* :meth:`AttentionClassifier.encode` -- tokens to hidden states h (B, T, H);
* :meth:`AttentionClassifier.attend` -- hidden states to attention alpha (B, T), a
  masked softmax over the real tokens (never SOS, EOS or padding);
* :meth:`AttentionClassifier.decode` -- hidden states plus ANY attention, (B, T) or a
  batch of K candidates (B, K, T), to output probabilities. Counterfactual
  experiments (permutation, adversarial search, erasure) keep h fixed and call only
  this step.

Encoders (J&W 2019, Sec. 3): ``lstm`` (BiLSTM, 128 per direction, H = 256, packed
sequences), ``cnn`` (kernel widths 1, 3, 5, 7 with 32 filters each, H = 128, same
padding, ReLU) and ``average`` (Linear(E -> 128) + tanh per token, no context).
Attention: ``tanh`` (additive, score_t = v . tanh(W h_t + b)), ``dot`` (scaled,
score_t = q . h_t / sqrt(H)), ``uniform`` (alpha_t = 1/T, frozen; Wiegreffe &
Pinter 2019's baseline) or ``given`` (no attention layer: alpha comes with the
batch, ``Batch.attention``; Wiegreffe & Pinter's diagnostic classifiers).
"""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .._checks import check_distribution, check_positive_int
from ..data import EOS, PAD, SOS, UNK, Batch
from .encoded import Encoded, real_token_mask
from .interventions import uniform_rows as uniform_attention
from .packed_lstm import packed_bilstm
from .protocol import ONLY_SITE, Site, SiteState, TokenOutput, class_probabilities, eval_mode

__all__ = [
    "ENCODERS",
    "ATTENTIONS",
    "ModelConfig",
    "Encoded",
    "Output",
    "AttentionClassifier",
    "real_token_mask",
    "check_token_ids",
    "BookTokens",
    "masked_softmax",
    "uniform_attention",
    "eval_mode",
]

ENCODERS = ("lstm", "cnn", "average")
ATTENTIONS = ("tanh", "dot", "uniform", "given")


@dataclass(frozen=True)
class ModelConfig:
    """What to build: encoder, attention and sizes (J&W defaults)."""

    #: The modules this family's training runs (its model cache key hashes them, beside
    #: attnlib.cache.TRAINING_CODE): editing another family's keeps these models.
    training_code = ("models.classifier", "models.encoded", "models.interventions", "models.packed_lstm")

    encoder: str = "lstm"
    attention: str = "tanh"
    embed_dim: int = 50
    hidden: int = 128  # per direction for the BiLSTM (H = 256); total for cnn/average
    n_classes: int = 2

    def __post_init__(self):
        if self.encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {self.encoder!r}; choose one of {', '.join(ENCODERS)}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; choose one of {', '.join(ATTENTIONS)}")
        check_positive_int(self.embed_dim, "embed_dim")
        check_positive_int(self.hidden, "hidden")
        check_positive_int(self.n_classes, "n_classes", minimum=2)
        if self.encoder == "cnn" and self.hidden % 4:
            raise ValueError("the cnn encoder splits hidden over 4 kernel widths: hidden must be a multiple of 4")

    @property
    def hidden_size(self) -> int:
        """H, the size of each hidden state h_t."""
        return 2 * self.hidden if self.encoder == "lstm" else self.hidden

    @property
    def name(self) -> str:
        return f"{self.encoder}+{self.attention}"

    def to_dict(self) -> dict:
        return asdict(self)

    def build(self, vocab_size: int, embeddings: np.ndarray | None = None) -> "AttentionClassifier":
        """A fresh model for a vocabulary (what :func:`attnlib.train.load_or_train` calls)."""
        return AttentionClassifier(vocab_size, self, embeddings=embeddings)


@dataclass
class Output:
    """A forward pass: output distribution, attention and the hidden states behind them."""

    probs: torch.Tensor  # (B, C) or (B, K, C): a distribution over classes
    logits: torch.Tensor  # (B, 1) for binary, (B, C) otherwise (or with a K dimension)
    attention: torch.Tensor  # (B, T) or (B, K, T)
    encoded: Encoded

    @property
    def prediction(self) -> torch.Tensor:
        return self.probs.argmax(-1)

    @property
    def head_attention(self) -> torch.Tensor:
        """(B, 1, T): the one attention row as a single head, the shape of a transformer's
        per-head rows (:class:`attnlib.models.transformer.TransformerOutput`)."""
        return self.attention.unsqueeze(-2)


def check_token_ids(batch, vocab_size: int, device) -> torch.Tensor:
    """The (B, T) ids of a Batch or LongTensor of the book's vocabulary, on ``device``, validated.

    Every row must be ``<SOS> words <EOS>`` followed only by padding, with at least one word,
    and every id in [0, vocab_size): the token-level protocol's ``token_ids`` for the book's
    two families (J&W's classifier and the small transformer).
    """
    if isinstance(batch, Batch):
        tokens = batch.tokens
    elif isinstance(batch, torch.Tensor):
        tokens = batch
    else:
        raise ValueError(
            f"batch must be an attnlib.data.Batch (e.g. split.batch(...)) or a LongTensor (B, T) of token ids, "
            f"got {type(batch).__name__}"
        )
    if tokens.ndim != 2 or tokens.dtype != torch.long:
        raise ValueError(f"token ids must be a LongTensor of shape (B, T), got {tokens.dtype} {tuple(tokens.shape)}")
    if tokens.shape[0] == 0:
        raise ValueError("the batch is empty")
    if bool(((tokens < 0) | (tokens >= vocab_size)).any()):
        raise ValueError(f"token ids must lie in [0, {vocab_size}) (the model's vocabulary)")
    tokens = tokens.to(device)
    filled = tokens != PAD
    lengths = filled.sum(-1)
    rows = torch.arange(tokens.shape[0], device=tokens.device)
    if (
        bool((filled[:, 1:] & ~filled[:, :-1]).any())  # padding only at the end
        or bool((tokens[:, 0] != SOS).any())
        or bool((tokens[rows, (lengths - 1).clamp_min(0)] != EOS).any())
    ):
        raise ValueError("every row must be <SOS> tokens <EOS> followed only by padding (see attnlib.data.collate)")
    if not bool(real_token_mask(tokens).any(-1).all()):
        raise ValueError("every instance needs at least one real token between <SOS> and <EOS>")
    return tokens


class BookTokens:
    """Token-level access (:class:`~attnlib.models.protocol.TokenModel`) over the book's vocabulary.

    The part the book's two families share (J&W's classifier, the small transformer): ids
    PAD=0, UNK=1, rows ``<SOS> words <EOS>`` (:func:`check_token_ids`), and the word
    embeddings ``self.embedding`` (GloVe rows, trainable) as e_t.
    """

    pad_id, unk_id, special_ids = PAD, UNK, (SOS, EOS)

    def token_ids(self, batch) -> torch.Tensor:
        """The batch's (B, T) ids on the model's device, validated (:func:`check_token_ids`)."""
        return check_token_ids(batch, self.vocab_size, self.embedding.weight.device)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """The word embeddings e_t (B, T, E), before anything else the model does: where gradients are taken."""
        return self.embedding(ids)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim restricted to ``mask``; masked entries are exactly 0."""
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


class _TanhAttention(nn.Module):
    """Additive attention (Bahdanau et al. 2015): score_t = v . tanh(W h_t + b)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.W = nn.Linear(hidden_size, hidden_size // 2)
        self.v = nn.Linear(hidden_size // 2, 1, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.v(torch.tanh(self.W(hidden))).squeeze(-1)


class _DotAttention(nn.Module):
    """Scaled dot attention with a learned query: score_t = q . h_t / sqrt(H)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.q = nn.Linear(hidden_size, 1, bias=False)
        self.scale = math.sqrt(hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.q(hidden).squeeze(-1) / self.scale


class AttentionClassifier(BookTokens, nn.Module):
    """J&W's classifier. ``model(tokens)`` returns an :class:`Output`.

    It meets :class:`attnlib.models.protocol.InterventionModel` with one site,
    :data:`~attnlib.models.protocol.ONLY_SITE`: ``site_state`` runs :meth:`encode` and
    :meth:`attend` once, ``decode_at`` is :meth:`decode` on the kept hidden states.

    Args:
        vocab_size: rows of the embedding table (ids PAD=0, UNK=1, SOS=2, EOS=3, words...).
        config: a :class:`ModelConfig`.
        embeddings: optional (vocab_size, embed_dim) initial embeddings (e.g. GloVe);
            they stay trainable, as in J&W.
    """

    def __init__(self, vocab_size: int, config: ModelConfig = ModelConfig(), embeddings: np.ndarray | None = None):
        super().__init__()
        check_positive_int(vocab_size, "vocab_size", minimum=5)
        self.config = config
        self.vocab_size = vocab_size
        E, H = config.embed_dim, config.hidden_size
        self.embedding = nn.Embedding(vocab_size, E, padding_idx=PAD)
        if embeddings is not None:
            emb = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
            if emb.shape != (vocab_size, E):
                raise ValueError(f"embeddings must have shape ({vocab_size}, {E}), got {tuple(emb.shape)}")
            with torch.no_grad():
                self.embedding.weight.copy_(emb)
                self.embedding.weight[PAD].zero_()
        if config.encoder == "lstm":
            self.lstm = nn.LSTM(E, config.hidden, batch_first=True, bidirectional=True)
        elif config.encoder == "cnn":
            self.convs = nn.ModuleList(
                nn.Conv1d(E, config.hidden // 4, kernel_size=k, padding=k // 2) for k in (1, 3, 5, 7)
            )
        else:
            self.projection = nn.Linear(E, H)
        if config.attention == "tanh":
            self.attention = _TanhAttention(H)
        elif config.attention == "dot":
            self.attention = _DotAttention(H)
        else:
            self.attention = None
        out = 1 if config.n_classes == 2 else config.n_classes
        self.decoder = nn.Linear(H, out)

    #: The protocol's sites: one attention layer with one head.
    sites = (ONLY_SITE,)

    @property
    def n_classes(self) -> int:
        return self.config.n_classes

    @property
    def hidden_size(self) -> int:
        """H, the size of a token's hidden state (what decode mixes)."""
        return self.config.hidden_size

    @property
    def has_own_attention(self) -> bool:
        """False for attention='given' (the batches carry it)."""
        return self.config.attention != "given"

    # ------------------------------------------------------------------ the protocol
    def site_state(self, batch, site: Site | None = None) -> SiteState:
        """Hidden states and the model's own attention (B, T), computed once (the protocol's first step)."""
        if site is not None and site != ONLY_SITE:
            raise ValueError(f"this model has one attention site, {ONLY_SITE}; got {site}")
        encoded = self.encode(batch)
        return SiteState(attention=self.attend(encoded), mask=encoded.mask, site=ONLY_SITE, inputs=encoded)

    def decode_at(self, state: SiteState, attention: torch.Tensor) -> torch.Tensor:
        """Output probabilities (B, C) or (B, K, C) for attention (B, T) or (B, K, T) at the site (h fixed)."""
        return self.decode(state.inputs.hidden, attention)[0]

    # ------------------------------------------------------------------ token-level access (protocol.TokenModel)
    #: alpha is one attention that decoding reads: J&W's gradient importance may detach it
    single_attention = True

    def forward_embedded(self, ids: torch.Tensor, embedded: torch.Tensor, *,
                         detach_attention: bool = False) -> TokenOutput:
        """Encode the given embeddings, attend, decode; ``detach_attention``: alpha as a constant (J&W)."""
        encoded = self.encode(ids, embedded=embedded)
        alpha = self.attend(encoded)
        probs, _ = self.decode(encoded.hidden, alpha.detach() if detach_attention else alpha)
        return TokenOutput(probs=probs, attention=alpha)

    def token_cost(self, T: int) -> int:
        """Elements per instance of a forward and backward pass, padded to T: T x H."""
        return T * self.hidden_size

    @property
    def unpadded_probs(self):
        """For the BiLSTM, rows of one length run unpacked (:func:`.fast_paths.unpadded_probs`); else None."""
        if self.config.encoder != "lstm":
            return None
        from .fast_paths import unpadded_probs

        return functools.partial(unpadded_probs, self)

    @property
    def deletion_tvd(self):
        """For the BiLSTM and the CNN, every single-word deletion from the states of x
        (:func:`.fast_paths.deletion_tvd`, :func:`.fast_paths.cnn_deletion_tvd`); else None."""
        from .fast_paths import cnn_deletion_tvd, deletion_tvd

        fast = {"lstm": deletion_tvd, "cnn": cnn_deletion_tvd}.get(self.config.encoder)
        return None if fast is None else functools.partial(fast, self)

    def probs_hiding(self, ids: torch.Tensor, hide: torch.Tensor) -> torch.Tensor:
        """Output distributions with the positions ``hide`` made padding-like in place ("replace by PAD")."""
        from .fast_paths import probs_hiding

        return probs_hiding(self, ids, hide)

    # ------------------------------------------------------------------ steps
    def attention_parameters(self) -> list[nn.Parameter]:
        """Parameters of the attention layer (J&W train them without weight decay)."""
        return [] if self.attention is None else list(self.attention.parameters())

    @staticmethod
    def _tokens(x) -> torch.Tensor:
        tokens = getattr(x, "tokens", x)
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype != torch.long:
            raise ValueError("expected a Batch or a LongTensor of token ids with shape (B, T)")
        return tokens

    def encode(self, x, *, embedded: torch.Tensor | None = None) -> Encoded:
        """Tokens (a Batch or (B, T) ids) to hidden states h (B, T, H).

        Pass ``embedded`` (B, T, E) to encode given embeddings instead of looking the
        tokens up (gradient importance differentiates with respect to them).
        """
        tokens = self._tokens(x).to(self.embedding.weight.device)
        mask = real_token_mask(tokens)
        if not bool(mask.any(-1).all()):
            raise ValueError("every instance needs at least one real token between <SOS> and <EOS>")
        lengths = (tokens != PAD).sum(-1)
        emb = self.embedding(tokens) if embedded is None else embedded  # (B, T, E)
        if self.config.encoder == "lstm":
            packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
            # cuDNN's RNN backward runs only in training mode: gradients through the LSTM in eval mode
            # (importance, explanations, faithfulness) take ATen's LSTM on a GPU instead
            no_cudnn = emb.is_cuda and not self.training and torch.is_grad_enabled()
            with torch.backends.cudnn.flags(enabled=False) if no_cudnn else contextlib.nullcontext():
                out = packed_bilstm(self.lstm, packed)  # nn.LSTM's bits; on a CPU with gradients, faster
            hidden, _ = pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
        elif self.config.encoder == "cnn":
            hidden = self.convolve(emb, tokens)
        else:
            hidden = torch.tanh(self.projection(emb))
        return Encoded(hidden=hidden, mask=mask, embedded=emb, lengths=lengths)

    def convolve(self, embedded: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The CNN encoder: hidden states (B, T, H) of ``embedded`` (B, T, E), padding as zero vectors.

        Position p reads positions p - r .. p + r (r = 3, the widest kernel's half-width), and
        zeros past either end, as padding does.
        """
        x_ = (embedded * (tokens != PAD).unsqueeze(-1)).transpose(1, 2)  # (B, E, T)
        return torch.cat([torch.relu(conv(x_)) for conv in self.convs], dim=1).transpose(1, 2)

    def attend(self, encoded: Encoded) -> torch.Tensor:
        """The model's own attention alpha (B, T): masked softmax of its scores (or uniform)."""
        if self.config.attention == "given":
            raise ValueError("a model with attention='given' has no attention of its own: its batches carry it")
        if self.attention is None:
            return uniform_attention(encoded.mask).to(encoded.hidden.dtype)
        return masked_softmax(self.attention(encoded.hidden), encoded.mask)

    def decode(self, hidden: torch.Tensor, attention: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output (probs, logits) from hidden states (B, T, H) and attention (B, T) or (B, K, T).

        c = sum_t alpha_t h_t; logits = Linear(c). With K candidate attentions per
        instance the result has a K dimension: probs (B, K, C).
        """
        if attention.ndim == 2:
            context = torch.einsum("bt,bth->bh", attention, hidden)
        elif attention.ndim == 3:
            # The decoder is linear, so Linear(sum_t alpha_t h_t) = sum_t alpha_t (W h_t) + b: project
            # each h_t once and mix the K candidates in logit space (H/C times fewer operations).
            token_logits = torch.matmul(hidden, self.decoder.weight.t())  # (B, T, C')
            if token_logits.shape[-1] == 1:  # binary: one logit per token; multiply-and-sum is ~2x a batched matmul on CPU
                logits = (attention * token_logits.transpose(1, 2)).sum(-1, keepdim=True) + self.decoder.bias
            else:
                logits = torch.einsum("bkt,btc->bkc", attention, token_logits) + self.decoder.bias
            return self.probabilities(logits), logits
        else:
            raise ValueError(f"attention must have shape (B, T) or (B, K, T), got {tuple(attention.shape)}")
        logits = self.decoder(context)
        return self.probabilities(logits), logits

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Class distribution from logits: [1 - sigmoid, sigmoid] for binary, softmax otherwise."""
        return class_probabilities(logits, self.config.n_classes)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        x,
        *,
        attention: torch.Tensor | None = None,
        detach_attention: bool = False,
        check_attention: bool = True,
    ) -> Output:
        """Run encode -> attend -> decode.

        Args:
            x: a Batch or (B, T) token ids.
            attention: decode with THIS attention instead of the model's own: (B, T), or
                (B, K, T) for K candidates per instance. Rows must be distributions over
                the real tokens (checked unless ``check_attention=False``).
            detach_attention: cut the gradient through alpha (J&W's gradient importance),
                so d output / d embedding flows only through the hidden states.
        """
        encoded = self.encode(x)
        if attention is None and self.config.attention == "given":
            attention = getattr(x, "attention", None)
            if attention is None:
                raise ValueError(
                    "this model decodes with a given attention: pass attention=, or a Batch from a split "
                    "with given attention (Split.with_attention / Dataset.with_attention)"
                )
        if attention is None:
            alpha = self.attend(encoded)
        else:
            alpha = attention.to(encoded.hidden.device, encoded.hidden.dtype)
            B, T = encoded.mask.shape
            if alpha.shape[0] != B or alpha.shape[-1] != T or alpha.ndim not in (2, 3):
                raise ValueError(
                    f"attention must have shape ({B}, {T}) or ({B}, K, {T}) to match the tokens, got {tuple(alpha.shape)}"
                )
            if check_attention:
                mask = encoded.mask if alpha.ndim == 2 else encoded.mask.unsqueeze(1).expand_as(alpha)
                if bool((alpha.detach().masked_select(~mask) != 0).any()):
                    raise ValueError("attention must be 0 on <SOS>, <EOS> and padding")
                check_distribution(alpha.detach(), "attention", mask)
        used = alpha.detach() if detach_attention else alpha
        probs, logits = self.decode(encoded.hidden, used)
        return Output(probs=probs, logits=logits, attention=alpha, encoded=encoded)

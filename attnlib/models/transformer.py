"""A small BERT-style classifier, trained from scratch: the book's transformer.

Inputs are J&W's batches (:class:`attnlib.data.Batch`): ``<SOS> w1 ... wn <EOS>``. The
``<SOS>`` position plays BERT's [CLS] (its state after the last layer feeds the output
layer) and ``<EOS>`` plays [SEP]. Words start from GloVe 6B 50d, as in every model of the
book, projected to ``d_model = heads x head_dim`` and added to learned position embeddings.

Each of the ``layers`` layers is pre-LayerNorm (LayerNorm -> multi-head self-attention ->
residual, LayerNorm -> feed-forward (GELU) -> residual): pre-LN trains from scratch without
the careful warm-up post-LN BERT needs, and a head still adds ``A (X W^V + b^V) W^O_h`` to
the residual stream, which is all Brunner et al.'s identifiability argument uses.
Every position attends to every real position ([CLS] and [SEP] included), never to padding.
With ``TransformerConfig(segment_separator=id)``, Pruthi et al.'s restricted attention: the
tokens before the first separator and those from it on attend only within their own segment,
in every layer; [CLS] attends to every real position and no other position attends to [CLS]
(their ``create_inter_attention_mask``). Information then crosses between the segments only
through [CLS]'s attention (:meth:`TransformerClassifier.visibility`). The separator opens the
second segment, as their [SEP] closes the first with a type id of the other: the first segment
is then exactly the tokens before it, so no unmarked token of it can carry them.

The model meets the intervention protocol (:mod:`attnlib.models.protocol`) with one site per
(layer, head), and shares its trace and edits with the pretrained family
(:mod:`attnlib.models.heads`).

Its products (the linear layers and the attention's two) are :mod:`attnlib.portable`'s fma
chains on a CPU: the same bits on every CPU for any thread count, and a row's bits do not
depend on the other rows of its batch.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from .._checks import check_positive_int, check_positive_number
from ..portable import Linear, linear, matmul
from ..data import EOS, PAD
from .classifier import BookTokens
from .heads import MASK, Trace, apply_edits, check_edits, check_sites, flatten_candidates, rowwise
from .protocol import DECOMPOSITION_STAGES, Site, SiteState, TokenOutput, class_probabilities

__all__ = ["TransformerConfig", "TransformerOutput", "TransformerClassifier", "attention_vectors"]


@dataclass(frozen=True)
class TransformerConfig:
    """What to build: layers, heads and the head dimension d_v (d_model = heads x head_dim)."""

    #: The modules this family's training runs (see ModelConfig.training_code): its own, the heads'
    #: edits, and J&W's classifier's, whose token conventions (BookTokens) it shares.
    training_code = ("models.transformer", "models.heads", "models.classifier", "models.encoded",
                     "models.interventions", "models.packed_lstm")

    layers: int = 4
    heads: int = 4
    head_dim: int = 32
    embed_dim: int = 50
    ffn_mult: int = 4
    dropout: float = 0.1
    max_positions: int = 256
    n_classes: int = 2
    #: the token id that splits an instance into two segments for Pruthi et al.'s restricted
    #: attention (None: every position attends to every real position)
    segment_separator: int | None = None

    def __post_init__(self):
        for name in ("layers", "heads", "head_dim", "embed_dim", "ffn_mult", "max_positions"):
            check_positive_int(getattr(self, name), name)
        check_positive_int(self.n_classes, "n_classes", minimum=2)
        check_positive_number(self.dropout, "dropout", allow_zero=True)
        if self.dropout >= 1:
            raise ValueError(f"dropout must be below 1, got {self.dropout}")
        if self.segment_separator is not None:
            check_positive_int(self.segment_separator, "segment_separator", minimum=EOS + 1)

    @property
    def d_model(self) -> int:
        return self.heads * self.head_dim

    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def name(self) -> str:
        restricted = "" if self.segment_separator is None else ", restricted attention"
        return f"transformer {self.layers}x{self.heads} d_v={self.head_dim}{restricted}"

    def to_dict(self) -> dict:
        fields = asdict(self)
        if self.segment_separator is None:  # an unrestricted model keeps the dict (and cache keys) it had
            del fields["segment_separator"]
        return {"family": "transformer", **fields}

    def build(self, vocab_size: int, embeddings: np.ndarray | None = None) -> "TransformerClassifier":
        """A fresh model for a vocabulary (what :func:`attnlib.train.load_or_train` calls)."""
        return TransformerClassifier(vocab_size, self, embeddings=embeddings)


@dataclass
class TransformerOutput:
    """A forward pass: the output distribution and its logits."""

    probs: torch.Tensor  # (B, C)
    logits: torch.Tensor  # (B, 1) for binary, (B, C) otherwise
    #: (B, T) the last layer's [CLS] (<SOS>) attention row, averaged over heads (after any edits);
    #: 0 on padding.
    attention: torch.Tensor | None = None
    #: (B, h, T) the same row per head: what Pruthi et al.'s R_mean penalises head by head.
    head_attention: torch.Tensor | None = None

    @property
    def prediction(self) -> torch.Tensor:
        return self.probs.argmax(-1)


class _Dropout(nn.Module):
    """Dropout that draws from its model's own generator, never torch's global one.

    The book trains several models at once in threads (:func:`attnlib.train.train_models`);
    with ``nn.Dropout`` two transformers would share the global generator, and which masks
    each drew would depend on the threads' timing: the same seed trained different models.
    The generator is seeded when the model is built (from the global generator, which
    :func:`attnlib.train.seeded` seeds under a lock), once per device.
    """

    def __init__(self, p: float, seed: int):
        super().__init__()
        self.p, self.seed = p, seed
        self._generators: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        g = self._generators.get(x.device)
        if g is None:
            g = self._generators[x.device] = torch.Generator(device=x.device).manual_seed(self.seed)
        keep = torch.rand(x.shape, generator=g, device=x.device, dtype=x.dtype) >= self.p
        return x * keep / (1 - self.p)


class _Layer(nn.Module):
    """One pre-LN transformer layer, split into its attention (probs, values) and the rest."""

    def __init__(self, config: TransformerConfig, drop: _Dropout):
        super().__init__()
        d, self.h, self.dv = config.d_model, config.heads, config.head_dim
        self.norm1 = nn.LayerNorm(d)
        self.qkv = Linear(d, 3 * d)
        self.out = Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.ffn = nn.Sequential(Linear(d, config.ffn_mult * d), nn.GELU(), Linear(config.ffn_mult * d, d))
        self.drop = drop  # the model's one dropout (one generator)
        self.scale = 1.0 / math.sqrt(self.dv)

    def attend(self, x: torch.Tensor, visible: torch.Tensor, key_edit=None,
               first_query_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention probabilities (B, h, T, T) and values (B, h, T, d_v) of the layer input x (B, T, d).

        ``visible``: the keys each query may attend to, from
        :meth:`TransformerClassifier.visibility` ((B, 1, 1, T) or (B, 1, T, T)). ``key_edit``:
        a function of the keys (B, T, d_model), all heads side by side, that returns new keys
        of that shape (the poster's adversarial keys). ``first_query_only``: only the first
        query row, probabilities (B, h, 1, T) (all the last layer needs).
        """
        B, T, d = x.shape
        normed = self.norm1(x)
        w, b = self.qkv.weight, self.qkv.bias
        if first_query_only:
            q = linear(normed[:, :1], w[:d], b[:d]).view(B, 1, self.h, self.dv).transpose(1, 2)
            k, v = linear(normed, w[d:], b[d:]).view(B, T, 2, d).unbind(2)
        else:
            q, k, v = self.qkv(normed).view(B, T, 3, d).unbind(2)
            q = q.reshape(B, T, self.h, self.dv).transpose(1, 2)
        if key_edit is not None:
            edited = key_edit(k)
            if not isinstance(edited, torch.Tensor) or edited.shape != k.shape:
                raise ValueError(f"a key edit must return keys of shape {tuple(k.shape)}")
            k = edited
        k = k.reshape(B, T, self.h, self.dv).transpose(1, 2)
        v = v.reshape(B, T, self.h, self.dv).transpose(1, 2)
        scores = matmul(q, k.transpose(-1, -2)) * self.scale
        if first_query_only:
            visible = visible[:, :, :1]  # (B, 1, 1, T) stays as it is
        scores = scores.masked_fill(~visible, float("-inf"))
        return torch.softmax(scores, dim=-1), v

    def finish(self, x: torch.Tensor, probs: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The layer's output from its input x, attention probs (B, h, Q, T) and values (B, h, T, d_v).

        With Q < T query rows (``attend(first_query_only=True)``) the output is that of the
        first Q positions, (B, Q, d).
        """
        B, _, Q, _ = probs.shape
        heads = matmul(probs, v).transpose(1, 2).reshape(B, Q, self.h * self.dv)
        x = x[:, :Q] + self.drop(self.out(heads))
        return x + self.drop(self.ffn(self.norm2(x)))

    def output_projection(self) -> torch.Tensor:
        """(h, d_v, d_model): head h's slice of W^O (the head adds probs @ v_h @ this)."""
        return self.out.weight.t().reshape(self.h, self.dv, -1)


def attention_vectors(probs: torch.Tensor, values: torch.Tensor, projection: torch.Tensor, states: torch.Tensor,
                      key_mask: torch.Tensor) -> torch.Tensor:
    """What each token j sends to query i through a layer's heads and its residual connection, (B, T, T, d_model):

    ``x[b, i, j] = sum_h probs[b, h, i, j] (values[b, h, j] @ projection[h]) + [i = j] states[b, i]``

    ``probs`` (B, h, T, T), ``values`` (B, h, T, d_v) (with their bias), ``projection`` (h, d_v, d_model):
    head h's slice of W^O, ``states`` (B, T, d_model): what the residual connection carries. Rows and
    columns of padding (``key_mask`` False) are 0. The products are :mod:`attnlib.portable`'s (a row's bits
    do not depend on the other rows). Kobayashi et al. (2021)'s ``sum_h alpha^h_ij f_h(x_j) + delta_ij x_i``
    (their code's ``residual_weighted_layer``); both transformer families' ``layer_decomposition``.
    """
    B, _, T, _ = probs.shape
    sent = matmul(values, projection)  # (B, h, T, d): f_h(x_j)
    # every (sentence, key j): its (T_i x h) weights times its (h x d) vectors, summed over the heads
    arrived = matmul(probs.permute(0, 3, 2, 1).contiguous(), sent.transpose(1, 2).contiguous()).transpose(1, 2)
    eye = torch.eye(T, dtype=states.dtype, device=states.device)
    out = arrived + eye[None, :, :, None] * states[:, :, None, :]
    m = key_mask.to(out.dtype)
    return out * m[:, :, None, None] * m[:, None, :, None]


class TransformerClassifier(BookTokens, nn.Module):
    """A small BERT-style classifier (see the module docstring). ``model(batch)`` -> :class:`TransformerOutput`.

    Args:
        vocab_size: rows of the embedding table (ids PAD=0, UNK=1, SOS=2, EOS=3, words...).
        config: a :class:`TransformerConfig`.
        embeddings: optional (vocab_size, embed_dim) initial word embeddings (GloVe); trainable.
    """

    has_own_attention = True
    rows_per_query = True  # a site is a head: one attention row per query (B, T, T)
    edits_keys = True  # forward(key_edits=...), embed, visibility: protocol.KeyEditModel

    def __init__(self, vocab_size: int, config: TransformerConfig = TransformerConfig(),
                 embeddings: np.ndarray | None = None):
        super().__init__()
        check_positive_int(vocab_size, "vocab_size", minimum=5)
        if not isinstance(config, TransformerConfig):
            raise ValueError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config, self.vocab_size = config, vocab_size
        d = config.d_model
        self.embedding = nn.Embedding(vocab_size, config.embed_dim, padding_idx=PAD)
        if embeddings is not None:
            emb = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
            if emb.shape != (vocab_size, config.embed_dim):
                raise ValueError(f"embeddings must have shape ({vocab_size}, {config.embed_dim}), got {tuple(emb.shape)}")
            with torch.no_grad():
                self.embedding.weight.copy_(emb)
                self.embedding.weight[PAD].zero_()
        self.project = Linear(config.embed_dim, d)
        self.positions = nn.Embedding(config.max_positions, d)
        nn.init.normal_(self.positions.weight, std=0.02)
        self.embed_norm = nn.LayerNorm(d)
        self.drop = _Dropout(config.dropout, seed=int(torch.randint(0, 2**62, (1,)).item()))
        self.layers = nn.ModuleList(_Layer(config, self.drop) for _ in range(config.layers))
        self.norm = nn.LayerNorm(d)
        self.decoder = Linear(d, 1 if config.n_classes == 2 else config.n_classes)
        self.sites = tuple(Site(layer, head) for layer in range(config.layers) for head in range(config.heads))

    @property
    def n_classes(self) -> int:
        return self.config.n_classes

    @property
    def hidden_size(self) -> int:
        return self.config.d_model

    # ------------------------------------------------------------------ steps
    def _tokens(self, x) -> torch.Tensor:
        tokens = getattr(x, "tokens", x)
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype != torch.long:
            raise ValueError("expected a Batch or a LongTensor of token ids with shape (B, T)")
        if tokens.shape[1] > self.config.max_positions:
            raise ValueError(
                f"a sentence of {tokens.shape[1]} tokens is longer than the model's {self.config.max_positions} "
                f"positions (TransformerConfig.max_positions); crop it"
            )
        if tokens.shape[1] < 2:
            raise ValueError("every instance must be wrapped as <SOS> ... <EOS>")
        return tokens.to(self.embedding.weight.device)

    def embed(self, tokens: torch.Tensor, embedded: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Input states (B, T, d) and the key mask (B, T) of the real positions.

        ``embedded``: the word embeddings (B, T, embed_dim) to use instead of looking the
        tokens up (gradients and integrated gradients take them as their input).
        """
        key_mask = tokens != PAD
        if not bool(key_mask[:, 0].all()):
            raise ValueError("empty instance: every row needs at least <SOS> <EOS>")
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        words = self.embedding(tokens) if embedded is None else embedded
        x = self.embed_norm(self.project(words) + self.positions(pos)[None])
        return self.drop(x), key_mask

    def visibility(self, tokens: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """Which keys each query may attend to, for :meth:`_Layer.attend`: True where allowed.

        Without a ``segment_separator``: the real keys, the same for every query, (B, 1, 1, T).
        With one (Pruthi et al.'s restricted attention), (B, 1, T, T): a position attends only
        to the real positions of its own segment (before the first separator, or from it on),
        never to [CLS]; [CLS] attends to every real position, itself included. A row without a
        separator is one segment.
        """
        if self.config.segment_separator is None:
            return key_mask[:, None, None, :]
        separator = tokens == self.config.segment_separator
        after = separator.long().cumsum(1) > 0  # (B, T) from the first separator on
        visible = (after[:, :, None] == after[:, None, :]) & key_mask[:, None, :]
        visible[:, :, 0] = False
        visible[:, 0, :] = key_mask
        return visible[:, None]

    # ------------------------------------------------------------------ token-level access (protocol.TokenModel)
    # token_ids, embed_tokens (the word embeddings, before the projection and the positions): BookTokens
    #: an attention per layer and head, none of them one alpha to detach
    single_attention = False

    def forward_embedded(self, ids: torch.Tensor, embedded: torch.Tensor, *,
                         detach_attention: bool = False) -> TokenOutput:
        """The forward pass from the given word embeddings; attention: the last layer's [CLS] row, heads averaged."""
        if detach_attention:
            raise ValueError(
                "detach_attention=True detaches J&W's single attention alpha; a TransformerClassifier has an "
                "attention per layer and head and no single one to detach: pass detach_attention=False (or None)"
            )
        tokens = self._tokens(ids)
        h, key_mask = self.embed(tokens, embedded)
        logits, cls_row = self._top(h, key_mask, self.visibility(tokens, key_mask), 0, {}, {})
        return TokenOutput(probs=self.probabilities(logits), attention=cls_row.mean(1))

    def token_cost(self, T: int) -> int:
        """Elements per instance of a forward and backward pass, padded to T: every layer's FFN and T x T heads."""
        c = self.config
        return c.layers * T * (c.ffn_mult * self.hidden_size + c.heads * T)

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Class distribution from logits: [1 - sigmoid, sigmoid] for binary, softmax otherwise."""
        return class_probabilities(logits, self.config.n_classes)

    def _step(self, index: int, x: torch.Tensor, key_mask: torch.Tensor, visible: torch.Tensor,
              head_edits: dict | None, key_edit=None, attended=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``index`` on the states x entering it: its output states and its probs (B, h, Q, T).

        ``attended``: the layer's own ``attend`` of x, (probs, values), when the caller has it
        already (several edits of one input share it); the edits then must all be row edits.

        The output reads only the [CLS] position after the last layer, so the last layer
        computes only that query row (Q = 1): the same output as all rows, about a sixth of
        the last layer's work. It computes all rows (Q = T) when it has an edit that sees
        whole (B, T, T) rows, i.e. one that is not a :class:`~attnlib.models.heads.RowEdit`.
        """
        probs, v = self._attend(index, x, visible, head_edits, key_edit) if attended is None else attended
        probs = apply_edits(probs, head_edits, key_mask)
        return self.layers[index].finish(x, probs, v), probs

    def _attend(self, index: int, x: torch.Tensor, visible: torch.Tensor, head_edits: dict | None,
                key_edit=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``index``'s ``attend`` of x, ready for ``head_edits``: (probs, values).

        Only the [CLS] query row after the last layer when every edit there is a row edit
        (:meth:`_step`); all rows otherwise.
        """
        only_cls = index == len(self.layers) - 1 and rowwise(head_edits)
        return self.layers[index].attend(x, visible, key_edit, first_query_only=only_cls)

    def _top(self, x: torch.Tensor, key_mask: torch.Tensor, visible: torch.Tensor, start: int, edits: dict,
             key_edits: dict | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits from the states x entering layer ``start``, and the last layer's [CLS] row (B, h, T).

        ``key_mask`` (B, T): the real positions; ``visible``: :meth:`visibility`; each layer
        runs :meth:`_step`. ``start`` past the last layer: the logits of x itself (no row).
        """
        last, cls_row = len(self.layers) - 1, None
        for index in range(start, len(self.layers)):
            x, probs = self._step(index, x, key_mask, visible, edits.get(index), (key_edits or {}).get(index))
            if index == last:
                cls_row = probs[:, :, 0]
        return self.decoder(self.norm(x[:, 0])), cls_row

    # ------------------------------------------------------------------ forward
    def forward(self, x, edits=None, key_edits=None) -> TransformerOutput:
        """Output for a Batch (or (B, T) ids), with ``edits`` {Site: edit} applied (see attnlib.models.heads).

        ``key_edits``: {layer: function} maps a layer's keys (B, T, d_model), all heads side
        by side, to new keys of the same shape before the attention is computed (the
        poster's adversarial keys); the values are left alone.
        """
        edits = check_edits(edits, self.config.layers, self.config.heads)
        key_edits = self._check_key_edits(key_edits)
        tokens = self._tokens(x)
        h, key_mask = self.embed(tokens)
        logits, cls_row = self._top(h, key_mask, self.visibility(tokens, key_mask), 0, edits, key_edits)
        return TransformerOutput(probs=self.probabilities(logits), logits=logits, attention=cls_row.mean(1),
                                 head_attention=cls_row)

    def masked_probabilities(self, x, masks) -> torch.Tensor:
        """Probabilities (K, B, C) with each of K sets of heads masked: Michel et al.'s gates xi_h = 0.

        ``masks``: K iterables of :class:`~attnlib.models.Site` (an empty one masks nothing).
        Mask k gives bit for bit ``forward(x, edits={site: heads.MASK for site in masks[k]}).probs``,
        at less cost: masks that mask the same heads below a layer share that layer's input
        and its attention, so layer l's attention runs once per distinct set of heads masked
        in layers 0..l-1 and the rest of it once per distinct set masked in layers 0..l (a
        depth-first walk that holds one state per layer). Needs eval mode (no dropout):
        shared layers would draw one dropout mask for several outputs.
        """
        if self.training and self.config.dropout > 0:
            raise ValueError("masked_probabilities shares layers between masks: call it in eval mode (model.eval())")
        if isinstance(masks, (Site, str, bytes, torch.Tensor)) or not isinstance(masks, Iterable):
            raise ValueError(f"masks must be a list of sets of Sites, got {type(masks).__name__}")
        L, H = self.config.layers, self.config.heads
        masks = [frozenset(check_sites(mask, L, H)) for mask in masks]
        if not masks:
            raise ValueError("masks is empty: give at least one set of heads (an empty set masks nothing)")
        tokens = self._tokens(x)
        h, key_mask = self.embed(tokens)
        visible = self.visibility(tokens, key_mask)
        out: list = [None] * len(masks)

        def walk(x: torch.Tensor, index: int, group: list) -> None:
            if index == L:
                probs = self.probabilities(self.decoder(self.norm(x[:, 0])))
                for k in group:
                    out[k] = probs
                return
            branches: dict = {}
            for k in group:
                heads = tuple(sorted(site.head for site in masks[k] if site.layer == index))
                branches.setdefault(heads, []).append(k)
            edits = {heads: {head: MASK for head in heads} for heads in branches}
            # a mask changes a layer after its softmax: the branches share the layer's attend,
            # made ready for all their edits at once (their union holds every edit's kind)
            attended = self._attend(index, x, visible, {head: e for one in edits.values() for head, e in one.items()})
            for heads, members in branches.items():
                y, _ = self._step(index, x, key_mask, visible, edits[heads], attended=attended)
                walk(y, index + 1, members)

        walk(h, 0, list(range(len(masks))))
        return torch.stack(out)

    def _check_key_edits(self, key_edits) -> dict:
        if key_edits is None:
            return {}
        if not isinstance(key_edits, dict):
            raise ValueError(f"key_edits must be a dict {{layer: function}}, got {type(key_edits).__name__}")
        for layer, fn in key_edits.items():
            if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.config.layers:
                raise ValueError(f"key_edits: layer {layer!r} is outside the model's {self.config.layers} layers")
            if not callable(fn):
                raise ValueError(f"key_edits: the edit of layer {layer} must be a function keys -> keys")
        return key_edits

    @torch.no_grad()
    def layer_output(self, layer: int, states: torch.Tensor, tokens: torch.Tensor, key_mask: torch.Tensor,
                     value_keep: torch.Tensor | None = None) -> torch.Tensor:
        """Layer ``layer``'s output (B, T, d_model) from given input states (B, T, d_model), with each
        value vector (every head's, bias included) multiplied by ``value_keep`` (B, T; 0 zeroes it) and
        the attention weights as they are (protocol capability ``value_zeroing``); eval mode."""
        was_training = self.training
        self.eval()
        try:
            visible = self.visibility(tokens, key_mask)
            probs, v = self.layers[layer].attend(states, visible)
            if value_keep is not None:
                v = v * value_keep[:, None, :, None].to(v.dtype)
            return self.layers[layer].finish(states, probs, v)
        finally:
            self.train(was_training)

    @torch.no_grad()
    def layer_decomposition(self, layer: int, states: torch.Tensor, tokens: torch.Tensor, key_mask: torch.Tensor,
                            *, upto: str = "attention") -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s output from given input states x (B, T, d_model), split by the token it comes
        from (protocol capability ``decomposition``; Kobayashi et al. 2021, GlobEnc): ``(vectors, rest)``,
        ``vectors`` (B, T, T, d_model) with ``vectors[b, i, j]`` what token j sends to query i, and ``rest``
        (B, T, d_model) the part from no token, so that ``vectors.sum(2) + rest`` is the output.

        The layer is pre-LN: its attention block gives ``h_i = x_i + sum_h sum_j alpha^h_ij f_h(LN1(x_j)) + b^O``
        with ``f_h(y) = (y W^V_h + b^V_h) W^O_h``. LN1 acts on each token alone, so it sits inside f
        (as the value bias does: Kobayashi et al. and GlobEnc keep b^V in f), and the residual stream
        itself passes no LayerNorm: ``vectors[b, i, j] = sum_h alpha^h_ij f_h(LN1(x_j)) + [i = j] x_i``.
        ``upto="attention"``: ``rest = b^O`` and the sum is h (the residual stream after the attention
        block). ``upto="layer"``: the layer's output ``h + FFN(LN2(h))``; the feed-forward block is not
        attributed (as in GlobEnc), so the same vectors, and ``rest = b^O + FFN(LN2(h))``. The model's
        final LayerNorm sits above the last layer, outside every layer, and is not here. Rows and
        columns of padding are 0; eval mode.
        """
        if upto not in DECOMPOSITION_STAGES:
            raise ValueError(f"upto must be one of {DECOMPOSITION_STAGES}, got {upto!r}")
        L = len(self.layers)
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < L:
            raise ValueError(f"layer must be an int in 0 .. {L - 1}, got {layer!r}")
        was_training = self.training
        self.eval()
        try:
            block = self.layers[layer]
            probs, v = block.attend(states, self.visibility(tokens, key_mask))
            vectors = attention_vectors(probs, v, block.output_projection(), states, key_mask)
            B, T, d = states.shape
            rest = block.out.bias.expand(B, T, d)
            if upto == "layer":
                heads = matmul(probs, v).transpose(1, 2).reshape(B, T, d)
                h = states + block.out(heads)
                rest = rest + block.ffn(block.norm2(h))
            return vectors, rest * key_mask.to(rest.dtype)[:, :, None]
        finally:
            self.train(was_training)

    def randomisation_stages(self) -> tuple:
        """Adebayo et al.'s cascade, top down (protocol capability ``randomisation``): one
        ``(stage, parameter names)`` per stage, the output first (the decoder and the final
        LayerNorm), then each layer from the top (``"layer 4"`` is the top of four), then the
        embeddings (words, their projection, positions and their LayerNorm). Every parameter
        of the model is in exactly one stage."""
        names = [name for name, _ in self.named_parameters()]

        def under(*prefixes: str) -> tuple:
            return tuple(n for n in names if n.split(".")[0] in prefixes
                         or any(n.startswith(p + ".") for p in prefixes))

        stages = [("output", under("decoder", "norm"))]
        for index in reversed(range(self.config.layers)):
            stages.append((f"layer {index + 1}", under(f"layers.{index}")))
        stages.append(("embeddings", under("embedding", "project", "positions", "embed_norm")))
        return tuple(stages)

    def initialised_parameters(self, seed: int) -> dict:
        """The parameters a model of this shape starts from when built with torch's generator at
        ``seed`` (the constructor's own initialisation; random word embeddings), without moving
        the host's generator: what the cascade puts in place of the trained ones."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            fresh = type(self)(self.vocab_size, self.config)
        return {name: p.detach().to(self.embedding.weight.device) for name, p in fresh.named_parameters()}

    @torch.no_grad()
    def trace(self, x) -> Trace:
        """Per layer and head: attention, values, output projection; and the hidden states (eval mode, no grad)."""
        was_training = self.training
        self.eval()
        try:
            tokens = self._tokens(x)
            h, key_mask = self.embed(tokens)
            visible = self.visibility(tokens, key_mask)
            states, attentions, values = [h], [], []
            for layer in self.layers:
                probs, v = layer.attend(h, visible)
                h = layer.finish(h, probs, v)
                attentions.append(probs)
                values.append(v)
                states.append(h)
        finally:
            self.train(was_training)
        m = key_mask.to(h.dtype)
        attentions = torch.stack(attentions, 1) * m[:, None, None, :, None]  # padded query rows -> 0
        values = torch.stack(values, 1) * m[:, None, None, :, None]
        hidden = torch.stack(states, 1) * m[:, None, :, None]
        projection = torch.stack([layer.output_projection() for layer in self.layers]).detach()
        return Trace(tokens=tokens, lengths=key_mask.sum(-1), key_mask=key_mask, attentions=attentions,
                     values=values, output_projection=projection, hidden_states=hidden)

    # ------------------------------------------------------------------ the protocol
    def site_state(self, batch, site: Site | None = None) -> SiteState:
        """The layers below ``site`` run once; the head's own rows (B, T, T) and the key mask (B, T).

        Rows of padding queries are the softmax over the real keys (valid distributions that
        reach nothing the output reads).
        """
        site = Site(0, 0) if site is None else site
        if site not in self.sites:
            raise ValueError(f"{site} is outside the model ({self.config.layers} layers x {self.config.heads} heads)")
        tokens = self._tokens(batch)
        h, key_mask = self.embed(tokens)
        visible = self.visibility(tokens, key_mask)
        for layer in self.layers[: site.layer]:
            probs, v = layer.attend(h, visible)
            h = layer.finish(h, probs, v)
        probs, v = self.layers[site.layer].attend(h, visible)
        return SiteState(attention=probs[:, site.head], mask=key_mask, site=site, inputs=(h, probs, v, visible))

    def decode_at(self, state: SiteState, attention: torch.Tensor) -> torch.Tensor:
        """Probabilities (B, K..., C) for the head's rows replaced by ``attention`` (B, K..., T, T)."""
        h, probs, v, visible = state.inputs
        B, T = state.mask.shape
        flat, cand, K = flatten_candidates(attention.to(probs.dtype), B, T)
        site = state.site
        rep = lambda t: t.repeat_interleave(K, dim=0) if K > 1 else t  # noqa: E731
        h, probs, v, key_mask, visible = rep(h), rep(probs), rep(v), rep(state.mask), rep(visible)
        layer = self.layers[site.layer]
        probs = apply_edits(probs, {site.head: flat}, key_mask)
        if site.layer == len(self.layers) - 1:
            probs = probs[:, :, :1]  # the output reads only the [CLS] row of the last layer
        x = layer.finish(h, probs, v)
        logits, _ = self._top(x, key_mask, visible, site.layer + 1, {})
        out = self.probabilities(logits)
        return out.reshape(B, *cand, out.shape[-1])

    def attention_parameters(self) -> list[nn.Parameter]:
        """None kept out of weight decay (the hook J&W's recipe uses for its attention layer)."""
        return []

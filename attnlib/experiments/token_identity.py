"""Token identifiability by layer (Brunner et al. 2020, Sec. 5): is token i still at position i?

An attention map over layer l's positions is read as attention over the *input tokens*
("the model looks at *bank*"). That reading assumes the hidden state e^l_i at position i
still stands for the token that entered there, e^0_i. Brunner et al. test the assumption
directly. For each layer l a probe g_l : R^D -> R^D maps a hidden state back to the input
embedding space, and token i counts as *identified* when the nearest of its own sentence's
input embeddings to g_l(e^l_i) is e^0_i itself:

    argmin_j  d(g_l(e^l_i), e^0_j)  over j < length  ==  i.

The share of identified tokens, layer by layer, is their Fig. 2a. The probes:

* ``"naive"``: g_l = identity (no training): is e^l_i still nearest to e^0_i as it stands?
* ``"linear"``: an affine map z -> z W + b;
* ``"mlp"``: Linear(D, mlp_hidden) -> ReLU -> Linear(mlp_hidden, D).

Each trained probe comes in two versions, one per distance, trained with the matching loss
(as Brunner et al. do): ``"l2"`` -- mean squared error to e^0_i, matched by smallest
Euclidean distance; ``"cosine"`` -- 1 - cos(g_l(e^l_i), e^0_i), matched by largest cosine
similarity. Inputs are standardised per layer and feature, and outputs produced as
mu + sigma x out (the targets' mean vector and overall standard deviation), with training
statistics: an affine reparametrisation that leaves both probe families as they are and
keeps Adam's step sizes meaningful whatever the scale of a model's hidden states.

* The linear l2 probe is the least-squares solution, in closed form (normal equations summed
  in float64, solved in float64, a ridge of :data:`RIDGE`). The linear cosine probe starts
  from it and trains further with Adam on the cosine loss.
* The MLPs start from nn.Linear's initialisation of the hidden layer and the least-squares
  output layer for those hidden features (ridge :data:`MLP_RIDGE`), then train with Adam,
  each on its own loss. The least-squares start buys in one pass what Adam from a random
  output layer takes several epochs to reach.

Defaults are sized for a CPU: 4 epochs of batches of 256 over at most 10,000 training tokens
take about 20 s on one thread for 7 layers of D = 384 (about 4 s an epoch, 4 s for the
rest; the cost grows with layers x D x (D + 2 mlp_hidden) x tokens x epochs). That is enough
for the linear probes (least squares does the work) and for an easy MLP problem (rotated,
shifted and squashed embeddings: within 0.005 of 20 epochs over 20,000 tokens), but the MLP
probe is short of convergence on hard layers (a toy transformer's last layer: 0.40 against
0.52 after 20 epochs): raise ``epochs`` for a final figure. ``mlp_hidden`` < D makes the
MLP a rank-``mlp_hidden`` bottleneck, so it can score *below* the linear probe.

Probes are trained only on tokens of the ``train`` sentences (a seeded subsample of at most
``max_train_tokens``) and scored only on tokens of the ``test`` sentences, so a probe cannot
memorise the test sentences' embeddings. All layers' probes of one kind train at once as
batched weights (L', D, D), on one thread, seeded: a run gives the same numbers twice.

Ties: the match is the *first* position with the best score (``torch.argmax`` returns the
first maximum). When a sentence holds the same input embedding twice, only the earlier
occurrence can be identified; a zero prediction has cosine 0 with every embedding, so it
matches position 0. Chance level, a uniformly random guess among the sentence's positions,
is the mean over test tokens of 1 / length (:attr:`TokenIdentity.chance`); a probe whose
prediction is the same for every position of a sentence (a hidden state with no token
information) identifies exactly one token per sentence, which is exactly chance.

What Brunner et al. found for BERT (their Fig. 2a): the naive probe's accuracy falls with
depth, while the learned probes recover most tokens even in the last layers, the cosine
versions better than the l2 ones: identity survives the layers, mostly in the *angle* of
the hidden states, and fades slowly with depth.
A high score here licenses reading attention over position i as attention over token i;
a low one (late layers, naive probe) warns that it does not.

Shapes: ``hidden_states`` is (B, L+1, S, D), padded to S; index 0 on axis 1 is the input
embedding layer (the targets), 1..L the layers' outputs. ``lengths`` (B,) counts every real
position ([CLS] and [SEP] included). Memory: the training tokens are held as float32
(max_train_tokens x L' x D x 4 bytes); matching runs over chunks of test sentences of at
most :data:`MATCH_BYTES` working memory.
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .. import portable, uncertainty
from .._checks import as_tensor, check_bool, check_finite, check_positive_int, check_positive_number, check_seed
from ..train import seeded, training_threads

__all__ = [
    "token_identifiability",
    "HiddenStateStore",
    "TokenIdentity",
    "nearest_positions",
    "PROBES",
    "DISTANCES",
    "RIDGE",
    "MLP_RIDGE",
    "MATCH_BYTES",
]

#: The probes, cheapest first: identity, affine map, one-hidden-layer ReLU network.
PROBES = ("naive", "linear", "mlp")

#: Distances for matching a prediction to an input embedding (and the loss a probe trains on).
DISTANCES = ("cosine", "l2")

#: Ridge of the least-squares (linear l2) probe, per training token, on standardised inputs:
#: small enough to leave a well-posed fit unchanged, large enough to make constant or
#: collinear features solvable (their weights go to 0).
RIDGE = 1e-6

#: Ridge of the least-squares start of the MLP probe's output layer (same units as RIDGE):
#: larger, as it only has to give Adam a good, well-conditioned starting point.
MLP_RIDGE = 0.1

#: Working memory (bytes) of one chunk of test sentences while matching (64 MB: chapter 11
#: peaks here, beside MiniLM and its stored states).
MATCH_BYTES = 64 * 2**20

#: Bytes of input converted or checked at a time (finite check, gathering training tokens).
_STEP_BYTES = 32 * 2**20


# ----------------------------------------------------------------------------- result
@dataclass
class TokenIdentity:
    """Output of :func:`token_identifiability`.

    frame:          one row per layer x probe x distance: layer, probe, distance, accuracy
                    (share of test tokens identified), low and high (its 95% Wilson interval
                    over the test tokens; tokens of one sentence are not independent, so it
                    is a lower bound on the uncertainty), n_tokens (test tokens scored).
    n_train_tokens: tokens the probes were trained on (after subsampling); 0 when only the
                    naive probe was asked for (nothing to train).
    n_test_tokens:  tokens scored (every real position of the test sentences).
    chance:         accuracy of a uniformly random guess: mean over test tokens of 1 / length.
    """

    frame: pd.DataFrame
    n_train_tokens: int
    n_test_tokens: int
    chance: float

    def to_frame(self) -> pd.DataFrame:
        """A copy of :attr:`frame`."""
        return self.frame.copy()

    def pivot(self, values: str = "accuracy") -> pd.DataFrame:
        """Accuracy (or its interval's ``"low"`` or ``"high"`` end) as a layer x "probe/distance"
        table, columns in the order computed."""
        if values not in ("accuracy", "low", "high"):
            raise ValueError(f"values must be 'accuracy', 'low' or 'high', got {values!r}")
        f = self.frame.assign(column=self.frame["probe"] + "/" + self.frame["distance"])
        table = f.pivot(index="layer", columns="column", values=values)
        table = table[list(dict.fromkeys(f["column"]))]
        table.columns.name = None
        return table


# ----------------------------------------------------------------------------- checks
def _check_hidden(hidden_states) -> torch.Tensor:
    hs, _ = as_tensor(hidden_states, "hidden_states", dtype=None)
    if not hs.is_floating_point():
        raise ValueError(f"hidden_states must be a float array, got dtype {hs.dtype}")
    if hs.ndim != 4:
        raise ValueError(
            f"hidden_states must be (B, L+1, S, D): sentences, layers (0 = input embeddings), "
            f"positions, features; got shape {tuple(hs.shape)}"
        )
    if min(hs.shape) == 0:
        raise ValueError(f"hidden_states has an empty axis: shape {tuple(hs.shape)}")
    step = max(1, _STEP_BYTES // (hs[0].numel() * hs.element_size()))
    for s in range(0, hs.shape[0], step):  # chunks of sentences: no full-size boolean copy
        check_finite(hs[s : s + step], "hidden_states")
    return hs


def _check_lengths(lengths, B: int, S: int) -> np.ndarray:
    arr = lengths.detach().cpu().numpy() if isinstance(lengths, torch.Tensor) else np.asarray(lengths)
    if arr.ndim != 1 or arr.shape[0] != B or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"lengths must be {B} integers (one per sentence), got {arr.dtype} of shape {arr.shape}")
    if (arr < 1).any() or (arr > S).any():
        raise ValueError(f"lengths must lie in [1, {S}] (the padded length), got {arr.min()}..{arr.max()}")
    return arr.astype(np.int64)


def _selection(sel, B: int, name: str) -> np.ndarray:
    """Sorted unique sentence indices from a boolean mask (B,) or an index array."""
    arr = sel.detach().cpu().numpy() if isinstance(sel, torch.Tensor) else np.asarray(sel)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a boolean mask of length {B} or a 1-d array of sentence indices, "
                         f"got shape {arr.shape}")
    if arr.dtype == bool:
        if arr.shape[0] != B:
            raise ValueError(f"{name} as a boolean mask must have length {B} (one per sentence), got {arr.shape[0]}")
        idx = np.flatnonzero(arr)
    elif arr.size == 0 or np.issubdtype(arr.dtype, np.integer):
        idx = arr.astype(np.int64)
        if idx.size and ((idx < 0).any() or (idx >= B).any()):
            raise ValueError(f"{name} indices must lie in [0, {B - 1}], got {idx.min()}..{idx.max()}")
        idx = np.unique(idx)
    else:
        raise ValueError(f"{name} must be a boolean mask or integer indices, got dtype {arr.dtype}")
    if idx.size == 0:
        raise ValueError(f"{name} selects no sentences; it must be non-empty")
    return idx


def _names(values, valid: tuple, name: str) -> tuple:
    if isinstance(values, str):
        values = (values,)
    if not isinstance(values, Sequence) or not values:
        raise ValueError(f"{name} must be a non-empty sequence of names from {', '.join(valid)}; got {values!r}")
    for v in values:
        if v not in valid:
            raise ValueError(f"unknown {name[:-1]} {v!r} in {name}; valid: {', '.join(valid)}")
    return tuple(dict.fromkeys(values))


def _layers(layers, n_layers: int) -> list:
    if layers is None:
        return list(range(n_layers))
    items = [layers] if isinstance(layers, numbers.Integral) else layers
    try:
        items = list(items)
    except TypeError:
        raise ValueError(f"layers must be None or layer indices in 0..{n_layers - 1}, got {layers!r}") from None
    if not items:
        raise ValueError("layers must be None or a non-empty list of layer indices")
    for layer in items:
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < n_layers:
            raise ValueError(f"layers must be indices in 0..{n_layers - 1} (0 = input embeddings), got {layer!r}")
    return sorted({int(layer) for layer in items})


# ----------------------------------------------------------------------------- matching
def _match(P: torch.Tensor, E0: torch.Tensor, lengths: torch.Tensor, distance: str) -> torch.Tensor:
    """Nearest own-sentence input position of each prediction; -1 at padding.

    P (c, M, S, D) predictions (M: layers, any number), E0 (c, S, D) input embeddings,
    lengths (c,). Returns (c, M, S) int64. Ties go to the first position (torch.argmax).
    """
    S = E0.shape[1]
    valid = torch.arange(S, device=E0.device) < lengths[:, None]  # (c, S)
    if distance == "cosine":
        score = F.normalize(P, dim=-1) @ F.normalize(E0, dim=-1).unsqueeze(1).transpose(-1, -2)
    else:  # smallest ||p - e||^2 = ||p||^2 - (2 p.e - ||e||^2): the largest 2 p.e - ||e||^2
        score = 2 * (P @ E0.unsqueeze(1).transpose(-1, -2)) - (E0 * E0).sum(-1)[:, None, None, :]
    score.masked_fill_(~valid[:, None, None, :], float("-inf"))
    return score.argmax(-1).masked_fill_(~valid[:, None, :], -1)


def nearest_positions(predictions, embeddings, lengths, *, distance: str = "cosine") -> np.ndarray:
    """For every position, the nearest input embedding of its own sentence: the matching step.

    Args:
        predictions: (B, S, D) or (B, M, S, D) predicted input embeddings (M: e.g. layers).
        embeddings: (B, S, D) the input embeddings e^0.
        lengths: (B,) real positions per sentence, each in 1..S.
        distance: ``"cosine"`` (largest cosine similarity) or ``"l2"`` (smallest Euclidean
            distance).

    Returns:
        int64 array shaped like ``predictions`` without D: the position j < length of the
        best match (the first one on ties), -1 at padding. Computed in float32.
    """
    P, _ = as_tensor(predictions, "predictions", dtype=torch.float32)
    E0, _ = as_tensor(embeddings, "embeddings", dtype=torch.float32)
    if not isinstance(distance, str) or distance not in DISTANCES:
        raise ValueError(f"unknown distance {distance!r}; valid: {', '.join(DISTANCES)}")
    if E0.ndim != 3:
        raise ValueError(f"embeddings must be (B, S, D), got shape {tuple(E0.shape)}")
    squeeze = P.ndim == 3
    if squeeze:
        P = P.unsqueeze(1)
    if P.ndim != 4 or P.shape[0] != E0.shape[0] or P.shape[2:] != E0.shape[1:]:
        raise ValueError(f"predictions must be (B, S, D) or (B, M, S, D) with B, S, D = {tuple(E0.shape)} "
                         f"of embeddings; got shape {tuple(P.shape[1:] if squeeze else P.shape)}")
    check_finite(P, "predictions")
    check_finite(E0, "embeddings")
    B, M, S, D = P.shape
    ln = torch.from_numpy(_check_lengths(lengths, B, S))
    step = max(1, MATCH_BYTES // (4 * M * S * (3 * D + 2 * S)))
    out = torch.cat([_match(P[s : s + step], E0[s : s + step], ln[s : s + step], distance)
                     for s in range(0, B, step)])
    return (out[:, 0] if squeeze else out).cpu().numpy()


# ----------------------------------------------------------------------------- probes
def _token_index(sentences: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sentence, position) of every real token of ``sentences``, in order."""
    ln = lengths[sentences]
    starts = np.cumsum(ln) - ln
    return np.repeat(sentences, ln), np.arange(int(ln.sum())) - np.repeat(starts, ln)


def _gather(hs: torch.Tensor, sent: np.ndarray, pos: np.ndarray, layers: list) -> tuple[torch.Tensor, torch.Tensor]:
    """X (L', N, D) float32: the tokens' hidden states at ``layers``; Y (N, D): their input embeddings."""
    N, D = len(sent), hs.shape[-1]
    X = torch.empty(len(layers), N, D, device="cpu")  # the probes train on the CPU
    Y = torch.empty(N, D, device="cpu")
    lay = torch.as_tensor(layers, device=hs.device)
    step = max(1, _STEP_BYTES // (4 * D * (len(layers) + 1)))
    for s in range(0, N, step):
        b = torch.as_tensor(sent[s : s + step], device=hs.device)
        p = torch.as_tensor(pos[s : s + step], device=hs.device)
        X[:, s : s + step] = hs[b[:, None], lay[None, :], p[:, None]].transpose(0, 1).cpu()
        Y[s : s + step] = hs[b, 0, p].cpu()
    return X, Y


@dataclass
class _Fitted:
    """Standardisation and the trained probes: ``weights[probe]``, each (K, L', ...), K = one per distance."""

    mu_x: torch.Tensor  # (L', D)
    sd_x: torch.Tensor  # (L', D)
    mu_y: torch.Tensor  # (D,)
    sigma_y: float
    weights: dict  # probe -> [W, b] (linear) or [W1, b1, W2, b2] (mlp)

    def predict(self, probe: str, H: torch.Tensor) -> torch.Tensor:
        """(c, K, L', S, D) predictions in input-embedding space from hidden states H (c, L', S, D)."""
        c, Lp, n, D = H.shape
        z = ((H - self.mu_x[:, None, :]) / self.sd_x[:, None, :]).transpose(0, 1).reshape(1, Lp, c * n, D)
        out = _forward(probe, self.weights[probe], z)  # (K, L', c n, D): one GEMM per layer
        return (self.mu_y + self.sigma_y * out).reshape(-1, Lp, c, n, D).permute(2, 0, 1, 3, 4)


def _forward(probe: str, w: list, z: torch.Tensor) -> torch.Tensor:
    """out = probe(z), weights (K, L', D, E), biases (K, L', E); z (..., K or 1, L', n, D)."""
    if probe == "linear":
        W, b = w
        return z @ W + b.unsqueeze(-2)
    W1, b1, W2, b2 = w
    return torch.relu(z @ W1 + b1.unsqueeze(-2)) @ W2 + b2.unsqueeze(-2)


def _loss(out: torch.Tensor, y: torch.Tensor, distances: tuple, mu_y, sigma_y) -> torch.Tensor:
    """Sum over distances and layers of the mean loss per token; out (K, L', n, D), y (n, D) standardised."""
    total = out.new_zeros(())
    for k, distance in enumerate(distances):
        if distance == "l2":  # mean squared error, in units of the targets' standard deviation
            total = total + ((out[k] - y) ** 2).mean((-2, -1)).sum()
        else:  # cosine in the input embedding space: un-standardise first
            total = total + (1 - F.cosine_similarity(mu_y + sigma_y * out[k], mu_y + sigma_y * y, dim=-1)).mean(-1).sum()
    return total


def _uniform(shape, bound: float, g: torch.Generator) -> torch.Tensor:
    return (torch.rand(shape, generator=g, device="cpu") * 2 - 1) * bound


def _ridge_fit(features, Yt: torch.Tensor, chunks: list, ridge: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Least squares with an intercept, per layer: W (L', F, D), b (L', D) minimise |f W + b - Yt|^2.

    ``features(chunk)`` gives (L', n, F) float32 rows. They are shifted by the first chunk's
    mean (so constant features are exactly 0, and the sums below do not cancel), multiplied
    in float32 per chunk, summed over chunks and solved in float64. The ridge is ``ridge`` x
    the number of rows x the features' mean variance (per layer), so it does not depend on
    their scale.
    """
    shift = features(chunks[0]).double().mean(1).float()[:, None, :]  # (L', 1, F)
    G = C = sf = None
    for c in chunks:
        f, y = features(c) - shift, Yt[c]
        ft = f.transpose(1, 2)
        G = (ft @ f).double() + (0 if G is None else G)
        C = (ft @ y).double() + (0 if C is None else C)
        sf = f.double().sum(1) + (0 if sf is None else sf)
    N = Yt.shape[0]
    mu_f, mu_y = sf / N, Yt.double().mean(0)
    G = G - N * mu_f[:, :, None] * mu_f[:, None, :]  # centred: the intercept takes the means
    C = C - N * mu_f[:, :, None] * mu_y
    lam = ridge * torch.diagonal(G, dim1=-2, dim2=-1).mean(-1).clamp_min(1e-30)  # (L',)
    W = torch.linalg.solve(G + lam[:, None, None] * torch.eye(G.shape[-1], dtype=G.dtype, device=G.device), C)
    mu_f = mu_f + shift[:, 0].double()
    return W.float(), (mu_y - (mu_f.unsqueeze(1) @ W).squeeze(1)).float()


def _fit(X: torch.Tensor, Y: torch.Tensor, probes: tuple, distances: tuple, *, mlp_hidden: int, epochs: int,
         batch_size: int, lr: float, seed: int, progress: bool) -> _Fitted:
    """Standardise X in place and train every requested probe, all layers at once."""
    from tqdm.auto import tqdm

    Lp, N, D = X.shape
    K = len(distances)
    step = max(1, _STEP_BYTES // (8 * D * (Lp + 1)))
    chunks = [slice(s, s + step) for s in range(0, N, step)]
    # standardise: per layer and feature for the inputs, one mean vector and one scale for the targets
    mu_x = sum(X[:, c].double().sum(1) for c in chunks) / N
    mu_y = sum(Y[c].double().sum(0) for c in chunks) / N
    var_x = sum(((X[:, c].double() - mu_x[:, None, :]) ** 2).sum(1) for c in chunks) / N
    ss_y = sum(float(((Y[c].double() - mu_y) ** 2).sum()) for c in chunks)
    sd_x = portable.sqrt(var_x)
    # features constant up to rounding (relative to the layer's scale) are centred, not scaled
    scale = mu_x.abs().amax(-1, keepdim=True) + sd_x.amax(-1, keepdim=True)
    sd_x = torch.where(sd_x > 1e-6 * scale, sd_x, torch.ones_like(sd_x))
    sigma_y = (ss_y / (N * D)) ** 0.5 or 1.0
    mu_yf = mu_y.float()
    for c in chunks:  # in place: X becomes z
        X[:, c] = (X[:, c] - mu_x[:, None, :].float()) / sd_x[:, None, :].float()
    Yt = (Y - mu_yf) / sigma_y

    weights: dict = {}
    if "linear" in probes:  # least squares: the l2 probe, and the cosine probe's start
        W, b = _ridge_fit(lambda c: X[:, c], Yt, chunks, RIDGE)
        weights["linear"] = [W.expand(K, -1, -1, -1).clone(), b.expand(K, -1, -1).clone()]
    g = torch.Generator().manual_seed(seed)
    if "mlp" in probes:  # nn.Linear's initial hidden layer; the output layer by least squares on its features
        with seeded(seed):
            bound = 1 / D**0.5
            W1, b1 = _uniform((Lp, D, mlp_hidden), bound, g), _uniform((Lp, mlp_hidden), bound, g)
        W2, b2 = _ridge_fit(lambda c: torch.relu(X[:, c] @ W1 + b1[:, None, :]), Yt, chunks, MLP_RIDGE)
        weights["mlp"] = [t.expand(K, *t.shape).clone() for t in (W1, b1, W2, b2)]

    # gradient training: the linear cosine probe (from least squares) and both MLPs, on the same batches
    trained = []  # (probe, distances trained, tensors)
    if "linear" in probes and "cosine" in distances:
        k = distances.index("cosine")
        w = [t[k : k + 1].clone().requires_grad_() for t in weights["linear"]]
        trained.append(("linear", ("cosine",), w))
    if "mlp" in probes:
        w = [t.requires_grad_() for t in weights["mlp"]]
        trained.append(("mlp", distances, w))
    if trained:
        opt = portable.adam([t for _, _, w in trained for t in w], lr=lr)
        for _ in tqdm(range(epochs), desc="token identity probes", unit="epoch", disable=not progress,
                      mininterval=1.0):
            order = torch.randperm(N, generator=g, device="cpu")
            for s in range(0, N, batch_size):
                idx = order[s : s + batch_size]
                xb, yb = X.index_select(1, idx).unsqueeze(0), Yt.index_select(0, idx)
                loss = sum(_loss(_forward(probe, w, xb), yb, dists, mu_yf, sigma_y) for probe, dists, w in trained)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        for probe, dists, w in trained:
            w = [t.detach() for t in w]
            if probe == "linear":
                k = distances.index("cosine")
                for full, part in zip(weights["linear"], w):
                    full[k] = part[0]
            else:
                weights["mlp"] = w
    return _Fitted(mu_x.float(), sd_x.float(), mu_yf, sigma_y, weights)


# ----------------------------------------------------------------------------- experiment
def token_identifiability(
    hidden_states,
    lengths,
    *,
    train,
    test,
    probes=("naive", "linear", "mlp"),
    distances=("cosine", "l2"),
    layers=None,
    mlp_hidden: int = 256,
    epochs: int = 4,
    batch_size: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    max_train_tokens: int = 10_000,
    progress: bool = True,
) -> TokenIdentity:
    """Share of test tokens whose input token a probe recovers from layer l (Brunner et al. 2020, Fig. 2a).

    Args:
        hidden_states: (B, L+1, S, D) float, numpy or torch, right-padded to S; [:, 0] are
            the input embeddings e^0 (the targets), [:, l] layer l's outputs.
        lengths: (B,) real positions per sentence ([CLS]/[SEP] included), each in 1..S.
        train, test: the sentences to train the probes on and to score them on: boolean
            masks of length B or integer indices; non-empty and disjoint.
        probes: any of ``"naive"`` (identity), ``"linear"`` (affine map) and ``"mlp"``
            (Linear(D, mlp_hidden) -> ReLU -> Linear(mlp_hidden, D)).
        distances: any of ``"cosine"`` and ``"l2"``; each trained probe is trained once per
            distance, with the matching loss (1 - cosine, or squared error).
        layers: the layers to score (0 = the input embeddings); default all.
        mlp_hidden: hidden units of the MLP probe.
        epochs, batch_size, lr: Adam passes over the training tokens, rows per step, step size.
        seed: seeds the training-token subsample, initial weights and batch order.
        max_train_tokens: train on a seeded subsample of at most this many tokens.
        progress: show a tqdm bar over the training epochs.

    Returns:
        A :class:`TokenIdentity`: one accuracy per layer x probe x distance, with the token
        counts and the chance level.
    """
    hs = _check_hidden(hidden_states)
    B, n_layers, S, D = hs.shape
    lengths = _check_lengths(lengths, B, S)
    tr, te = _selection(train, B, "train"), _selection(test, B, "test")
    both = np.intersect1d(tr, te)
    if both.size:
        raise ValueError(f"train and test must be disjoint; {both.size} sentence(s) are in both, e.g. {both[:5].tolist()}")
    probes = _names(probes, PROBES, "probes")
    distances = _names(distances, DISTANCES, "distances")
    layers = _layers(layers, n_layers)
    mlp_hidden = check_positive_int(mlp_hidden, "mlp_hidden")
    epochs = check_positive_int(epochs, "epochs")
    batch_size = check_positive_int(batch_size, "batch_size")
    lr = check_positive_number(lr, "lr")
    seed = check_seed(seed)
    max_train_tokens = check_positive_int(max_train_tokens, "max_train_tokens")
    progress = check_bool(progress, "progress")

    fitted, n_train = _train_probes(hs, lengths, tr, layers, probes, distances, mlp_hidden=mlp_hidden, epochs=epochs,
                                    batch_size=batch_size, lr=lr, seed=seed, max_train_tokens=max_train_tokens,
                                    progress=progress)
    te = te[np.argsort(lengths[te], kind="stable")]  # in chunks of similar length
    counts = _count_matches(hs, lengths, te, layers, probes, distances, fitted, mlp_hidden=mlp_hidden)
    n_test = int(lengths[te].sum())
    rows = []
    for i, layer in enumerate(layers):
        for p in probes:
            for d in distances:
                share = uncertainty.proportion(int(counts[p, d][i]), n_test)
                rows.append({"layer": layer, "probe": p, "distance": d, "accuracy": share.estimate,
                             "low": share.low, "high": share.high, "n_tokens": n_test})
    return TokenIdentity(
        frame=pd.DataFrame(rows, columns=["layer", "probe", "distance", "accuracy", "low", "high", "n_tokens"]),
        n_train_tokens=int(n_train) if fitted is not None else 0,
        n_test_tokens=n_test,
        chance=float(len(te) / n_test),
    )


def _train_probes(hs, lengths, tr, layers, probes, distances, *, mlp_hidden, epochs, batch_size, lr, seed,
                  max_train_tokens, progress):
    """The probes fitted on (a seeded subsample of ``max_train_tokens`` of) the train sentences' tokens,
    and how many tokens they saw; (None, tokens) when only the naive probe is asked for."""
    sent, pos = _token_index(tr, lengths)
    n_train = len(sent)
    if all(p == "naive" for p in probes):
        return None, n_train
    if n_train > max_train_tokens:
        keep = np.sort(np.random.default_rng(seed).choice(n_train, max_train_tokens, replace=False))
        sent, pos = sent[keep], pos[keep]
        n_train = max_train_tokens
    with training_threads(torch.device("cpu")):
        X, Y = _gather(hs, sent, pos, layers)
        fitted = _fit(X, Y, probes, distances, mlp_hidden=mlp_hidden, epochs=epochs, batch_size=batch_size,
                      lr=lr, seed=seed, progress=progress)
        del X, Y
    return fitted, n_train


def _count_matches(hs, lengths, te, layers, probes, distances, fitted, *, mlp_hidden) -> dict:
    """{(probe, distance): (layers,) tokens of the test sentences ``te`` whose input embedding is the
    nearest to the probe's prediction from their hidden state}, in chunks under :data:`MATCH_BYTES`."""
    B, n_layers, S, D = hs.shape
    Lp, K = len(layers), len(distances)
    per_sentence = 4 * Lp * S * (2 * D + K * (3 * D + mlp_hidden * ("mlp" in probes) + 2 * S))
    step = max(1, MATCH_BYTES // per_sentence)
    counts = {(p, d): torch.zeros(Lp, dtype=torch.int64, device="cpu") for p in probes for d in distances}
    lay = torch.as_tensor(layers, device=hs.device)
    with torch.no_grad():
        for s in range(0, len(te), step):
            idx = te[s : s + step]
            ln = torch.from_numpy(lengths[idx])
            n = int(ln.max())
            b = torch.as_tensor(idx, device=hs.device)
            H = hs[b[:, None], lay[None, :], :n].to("cpu", torch.float32)  # (c, L', n, D)
            E0 = hs[b, 0, :n].to("cpu", torch.float32)  # (c, n, D)
            truth = torch.arange(n, device="cpu")
            for probe in probes:
                P = H.unsqueeze(1) if probe == "naive" else fitted.predict(probe, H)  # (c, 1 or K, L', n, D)
                for k, distance in enumerate(distances):
                    best = _match(P[:, 0 if probe == "naive" else k], E0, ln, distance)  # (c, L', n)
                    counts[probe, distance] += (best == truth).sum((0, 2))
    return counts


# ----------------------------------------------------------------------------- gathering states
class HiddenStateStore:
    """Hidden states of a model's short sentences, gathered batch by batch into one float16 buffer.

    The input of :func:`token_identifiability` for a corpus too large to trace at once:
    ``states`` (n, layers, max_tokens, width) float16, zero past each sentence's length;
    ``lengths`` (n,); ``is_train`` (n,) bool, which sentences the probes train on; ``count``,
    how many rows are filled (the first ``count``). ``n``: room for that many sentences;
    ``layers``: the trace's hidden-state layers (L + 1, the input embeddings included);
    ``width``: d_model; ``max_tokens``: the longest sentence kept (longer ones are the
    caller's to leave out, :meth:`add` refuses them).
    """

    def __init__(self, n: int, layers: int, width: int, *, max_tokens: int):
        n, layers, width = (check_positive_int(v, k) for v, k in ((n, "n"), (layers, "layers"), (width, "width")))
        self.max_tokens = check_positive_int(max_tokens, "max_tokens")
        self.states = torch.zeros(n, layers, self.max_tokens, width, dtype=torch.float16, device="cpu")
        self.lengths = torch.zeros(n, dtype=torch.long, device="cpu")
        self.is_train = torch.zeros(n, dtype=torch.bool, device="cpu")
        self.count = 0

    def __repr__(self) -> str:
        return f"HiddenStateStore({self.count} of {len(self.lengths)} sentences, max_tokens={self.max_tokens})"

    def add(self, trace, rows, *, train: bool) -> None:
        """Keep sentences ``rows`` (indices into the batch) of ``trace`` (an :class:`attnlib.models.Trace`).

        ``train``: whether they are probe-training sentences. Raises ValueError when a row is
        longer than ``max_tokens``, the trace's layers or width do not fit, or the store is full.
        """
        check_bool(train, "train")
        rows = torch.as_tensor(rows, dtype=torch.long, device="cpu").reshape(-1)
        k, c = len(rows), self.count
        if c + k > len(self.lengths):
            raise ValueError(f"the store holds {len(self.lengths)} sentences; {c} are in, {k} more do not fit")
        hidden = trace.hidden_states
        if hidden.ndim != 4 or hidden.shape[1] != self.states.shape[1] or hidden.shape[3] != self.states.shape[3]:
            raise ValueError(f"trace.hidden_states {tuple(hidden.shape)} must be (B, {self.states.shape[1]}, T, "
                             f"{self.states.shape[3]})")
        lengths = trace.lengths.cpu()[rows]
        if k and int(lengths.max()) > self.max_tokens:
            raise ValueError(f"a sentence of rows is longer than max_tokens = {self.max_tokens}")
        kept = hidden[rows.to(hidden.device), :, : self.max_tokens]  # 0 past each length
        self.states[c : c + k, :, : kept.shape[2]] = kept.half().cpu()
        self.lengths[c : c + k], self.is_train[c : c + k] = lengths, train
        self.count += k

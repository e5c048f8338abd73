"""ipywidgets for exploring the book's knobs. Each has a static figure twin in attnlib.viz.

In the rendered (static) book the sliders show at their default values but cannot
recompute without a kernel; run the chapter in Jupyter, Colab or Binder to move them. Every
explorer says so itself, in a line above its controls (:data:`KERNEL_NOTE`), since a static
page's controls look live.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["KERNEL_NOTE", "measures_explorer", "temperature_explorer", "tempered", "sentence_explorer", "importance_explorer", "adversary_explorer", "permutation_explorer", "needle_figure", "needle_explorer", "lambda_figures", "lambda_explorer", "null_space_figure", "null_space_explorer", "head_figure", "head_explorer", "deception_figure", "deception_explorer", "rollout_figure", "rollout_explorer"]


#: The line above every explorer's controls: on a static page they look live but are not.
KERNEL_NOTE = (
    "Interactive: the controls recompute in a running notebook (Jupyter, Colab or Binder). "
    "On the book's static page they show their default setting."
)


def _fit():
    """A control's layout on any screen: the width it needs, never more than its box (a phone)."""
    import ipywidgets as W

    return W.Layout(width="auto", max_width="100%")


def _slider():
    """A slider's layout: a usable track on a desktop, the whole box on a phone (never wider)."""
    import ipywidgets as W

    return W.Layout(width="100%", max_width="380px")


def _wrap():
    """A row of controls that wraps onto the next line where the box is narrow."""
    import ipywidgets as W

    return W.Layout(flex_flow="row wrap", max_width="100%")


def _panel(children: list):
    """An explorer: the kernel note, then its controls and output, one under the other."""
    import ipywidgets as W

    note = W.HTML(f'<span style="font-size:0.85em;opacity:0.8">{KERNEL_NOTE}</span>')
    return W.VBox([note, *children])


def _normalise(w) -> np.ndarray:
    w = np.clip(np.asarray(w, dtype=float), 0.0, None)
    s = w.sum()
    return np.full(len(w), 1.0 / len(w)) if s <= 0 else w / s


def measures_explorer(p: Sequence[float], q: Sequence[float], tokens: Sequence[str]):
    """Sliders for every weight of p and q (renormalised); redraws :func:`attnlib.viz.measures_figure`."""
    import ipywidgets as W
    import matplotlib.pyplot as plt
    from IPython.display import display

    from .viz import measures_figure

    if not (len(p) == len(q) == len(tokens)):
        raise ValueError("p, q and tokens must have the same length")
    style = {"description_width": "45px"}
    layout = W.Layout(width="210px")
    ps = [W.FloatSlider(value=float(v), min=0, max=1, step=0.05, description=f"p[{t}]", style=style, layout=layout, continuous_update=False) for v, t in zip(p, tokens)]
    qs = [W.FloatSlider(value=float(v), min=0, max=1, step=0.05, description=f"q[{t}]", style=style, layout=layout, continuous_update=False) for v, t in zip(q, tokens)]
    out = W.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            fig = measures_figure(_normalise([s.value for s in ps]), _normalise([s.value for s in qs]), tokens,
                                  title="p and q, renormalised")
            display(fig)
            plt.close(fig)

    for s in ps + qs:
        s.observe(redraw, names="value")
    redraw()
    return _panel([W.HBox([W.VBox(ps), W.VBox(qs)], layout=_wrap()), out])


def temperature_explorer(p: Sequence[float], tokens: Sequence[str], temperature: float = 1.0):
    """Sharpen or flatten p: q = softmax(log p / temperature). Rank (tau) stays, TVD/JSD move."""
    import ipywidgets as W
    import matplotlib.pyplot as plt
    from IPython.display import display

    from .viz import measures_figure

    p = _normalise(p)
    slider = W.FloatLogSlider(value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature", style={"description_width": "initial"}, continuous_update=False)
    out = W.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            fig = measures_figure(p, tempered(p, slider.value), tokens, names=("p", "q"), title=f"q = p sharpened/flattened, temperature {slider.value:.2f}")
            display(fig)
            plt.close(fig)

    slider.observe(redraw, names="value")
    redraw()
    return _panel([slider, out])


def tempered(p, temperature: float) -> np.ndarray:
    """softmax(log p / temperature) over the entries where p > 0 (zeros stay zero)."""
    p = np.asarray(p, dtype=float)
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    out = np.zeros_like(p)
    pos = p > 0
    logits = np.log(p[pos]) / temperature
    e = np.exp(logits - logits.max())
    out[pos] = e / e.sum()
    return out


def sentence_explorer(models: dict, vocab, text: str = "a gorgeous , witty film with a dull ending"):
    """Type a sentence, pick a model: see its prediction and attention heatmap (Chapter 1).

    ``models`` maps a display name to an :class:`attnlib.models.AttentionClassifier`.
    """
    import ipywidgets as W
    import matplotlib.pyplot as plt
    import torch
    from IPython.display import display

    from ..data import collate, tokenize
    from .viz import attention_heatmap

    if not models:
        raise ValueError("models must map at least one name to a model")
    box = W.Text(value=text, description="sentence", layout=W.Layout(width="90%"), continuous_update=False)
    choice = W.Dropdown(options=list(models), description="model")
    out = W.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            try:
                tokens = tokenize(box.value)
            except ValueError as err:
                print(f"cannot read that sentence: {err}")
                return
            ids = vocab.encode(tokens)
            batch = collate([ids], labels=[0], index=[0])
            model = models[choice.value]
            with torch.no_grad():
                result = model(batch.to(next(model.parameters()).device))
            alpha = result.attention[0][result.encoded.mask[0]].cpu().numpy()
            p = float(result.probs[0, 1])
            shown = [t if vocab.stoi.get(t) is not None else f"{t}(unk)" for t in tokens]
            fig = attention_heatmap([shown], [alpha], titles=[f"{choice.value}: p(positive) = {p:.2f}"])
            display(fig)
            plt.close(fig)

    box.observe(redraw, names="value")
    choice.observe(redraw, names="value")
    redraw()
    return _panel([box, choice, out])


def _figure_out(out, draw):
    """Clear ``out`` and show the figure ``draw()`` returns (closed afterwards)."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    with out:
        out.clear_output(wait=True)
        fig = draw()
        display(fig)
        plt.close(fig)


def importance_explorer(results: dict, split, index: int = 0):
    """Pick a model and an instance: attention, gradient and leave-one-out side by side (Chapter 3).

    ``results`` maps a display name to an :class:`attnlib.importance.ImportanceResult` on ``split``.
    """
    from ..experiments.importance import instance_agreement
    from .viz import compare_heatmap

    per_instance = {name: instance_agreement(r) for name, r in results.items()}

    def draw(name, i):
        r, row = results[name], per_instance[name].iloc[i]
        return compare_heatmap(split.tokens[int(r.indices[i])], {
            f"attention (p(positive) = {r.probs[i, -1]:.2f})": r.attention[i],
            f"gradient  (tau with attention {row['tau_g']:.2f})": r.gradient[i],
            f"leave-one-out  (tau with attention {row['tau_loo']:.2f})": r.loo[i],
        })

    return _model_instance_explorer(results, "ImportanceResult", draw, index)


def adversary_explorer(model, split, indices: Sequence[int], *, eps: float | None = None, k: int | None = None,
                       steps: int = 300, seed: int = 0):
    """Move eps (and k): re-run the adversarial search on a few sentences of ``split`` and redraw (Chapter 5).

    ``eps``, ``k``: where the sliders start (default: the adversary's, ``counterfactual.ADVERSARY``);
    ``steps``: fewer than the adversary's 500, so that a slider move answers in seconds.
    """
    import ipywidgets as W

    from ..experiments.counterfactual import ADVERSARY, adversarial_attention
    from .viz import adversary_heatmap

    eps = ADVERSARY.eps if eps is None else eps
    k = ADVERSARY.k if k is None else k
    if len(indices) == 0:
        raise ValueError("indices must name at least one instance of the split")
    batch = split.batch(list(indices))
    eps_slider = W.FloatLogSlider(value=eps, base=10, min=-3, max=-0.5, step=0.1, description="epsilon",
                                  readout_format=".3f", continuous_update=False)
    k_slider = W.IntSlider(value=k, min=1, max=10, description="k", continuous_update=False)
    out = W.Output()

    def draw():
        res = adversarial_attention(model, batch, eps=eps_slider.value, k=k_slider.value, steps=steps, seed=seed)
        return adversary_heatmap(res, split)

    for w in (eps_slider, k_slider):
        w.observe(lambda *_: _figure_out(out, draw), names="value")
    _figure_out(out, draw)
    return _panel([W.HBox([eps_slider, k_slider], layout=_wrap()), out])


def permutation_explorer(results: dict, split, attention: dict, index: int = 0):
    """Pick a model and an instance: its attention and the output change under each permutation (Chapter 4).

    ``results`` maps a name to an :class:`attnlib.counterfactual.PermutationResult` on ``split``;
    ``attention`` maps the same names to per-split-position attention lists.
    """
    from .viz import permutation_figure

    def draw(name, i):
        return permutation_figure(results[name], split, i, attention[name], name=name)

    return _model_instance_explorer(results, "PermutationResult", draw, index)


def _model_instance_explorer(results: dict, what: str, draw, index: int = 0):
    """A model dropdown and an instance slider over ``results``; ``draw(name, i)`` returns the figure."""
    import ipywidgets as W

    if not results:
        raise ValueError(f"results must map at least one name to a {what}")
    n = min(len(r) for r in results.values())
    choice = W.Dropdown(options=list(results), description="model")
    pick = W.IntSlider(value=min(index, n - 1), min=0, max=n - 1, description="instance", continuous_update=False)
    out = W.Output()
    for w in (choice, pick):
        w.observe(lambda *_: _figure_out(out, lambda: draw(choice.value, pick.value)), names="value")
    _figure_out(out, lambda: draw(choice.value, pick.value))
    return _panel([W.HBox([choice, pick], layout=_wrap()), out])


def needle_figure(models: dict, vocab, marker: str = "superb", length: int = 150, seed: int = 0):
    """One needle sentence (``marker`` among ``length`` distractors) through each model (Chapter 6)."""
    import torch

    from ..data import collate, needle_sentence
    from ..models import eval_mode
    from .viz import plot_needle_attention

    tokens = needle_sentence(marker, length, seed=seed)
    batch = collate([vocab.encode(tokens)], labels=[0])
    rows = {}
    for name, model in models.items():
        model = getattr(model, "model", model)
        with torch.no_grad(), eval_mode(model):
            out = model(batch.to(next(model.parameters()).device))
        alpha = out.attention[0][out.encoded.mask[0]].cpu().numpy()
        rows[f"{name}: p(positive) = {float(out.probs[0, 1]):.2f}"] = alpha
    return plot_needle_attention(rows, tokens.index(marker), title=f"'{marker}' among {length - 1} distractors")


def needle_explorer(models: dict, vocab, marker: str = "superb", length: int = 150, seed: int = 0):
    """Slide the sentence length and pick the marker: each model's attention and p(positive)."""
    import ipywidgets as W

    from ..data import MARKER_POLARITY

    if not models:
        raise ValueError("models must map at least one name to a model")
    markers = [w for w in MARKER_POLARITY if vocab.stoi.get(w) is not None]
    length_slider = W.IntSlider(value=length, min=5, max=400, step=5, description="length T", continuous_update=False)
    marker_box = W.Dropdown(options=markers, value=marker if marker in markers else markers[0], description="marker")
    sentence_seed = W.IntSlider(value=seed, min=0, max=20, description="sentence", continuous_update=False)
    out = W.Output()

    def redraw(*_):
        _figure_out(out, lambda: needle_figure(models, vocab, marker_box.value, length_slider.value, sentence_seed.value))

    for w in (length_slider, marker_box, sentence_seed):
        w.observe(redraw, names="value")
    redraw()
    return _panel([W.HBox([length_slider, marker_box, sentence_seed], layout=_wrap()), out])


def lambda_figures(sweep, indices: Sequence[int], lam, *, points: dict | None = None, split="test",
                   spread: dict | None = None):
    """The lambda-sweep curve with ``lam`` ringed, and base vs adversary attention on a few sentences (Chapter 8).

    ``sweep`` is an :class:`attnlib.adversarial_training.LambdaSweep`; ``indices`` pick
    sentences of its ``split``; ``points`` are extra (jsd, tvd) points for the curve and
    ``spread`` the models and intervals behind them (see :func:`attnlib.viz.plot_lambda_sweep`).
    Returns (curve figure, heatmap figure).
    """
    from ..metrics import jsd
    from ..train import predict
    from .viz import attention_heatmap, plot_lambda_sweep

    if len(indices) == 0:
        raise ValueError("indices must name at least one instance of the split")
    adversary = sweep[lam]
    data = sweep.dataset[split] if isinstance(split, str) else split
    subset = data.subset(list(indices))
    base, adv = predict(sweep.base.model, subset), predict(adversary.model, subset)
    sentences, weights, titles = [], [], []
    for j, tokens in enumerate(subset.tokens):
        d = float(jsd(adv.attention[j], base.attention[j]))
        sentences += [list(tokens), list(tokens)]
        weights += [base.attention[j], adv.attention[j]]
        titles += [f"base: p(positive) = {base.probs[j, -1]:.2f}",
                   f"adversary, λ = {adversary.lam:g}: p(positive) = {adv.probs[j, -1]:.2f}, attention JSD {d:.2f} from the base"]
    curve = plot_lambda_sweep(sweep.frame, points=points, highlight=adversary.lam, spread=spread)
    return curve, attention_heatmap(sentences, weights, titles=titles)


def lambda_explorer(sweep, indices: Sequence[int], lam=None, *, points: dict | None = None, split="test",
                    spread: dict | None = None):
    """Slide along a precomputed lambda sweep: its curve point, its heatmaps and its F1 (Chapter 8).

    Retraining an adversary takes minutes, so the slider only moves between the adversaries
    ``sweep`` already holds (trained once and cached by :func:`attnlib.adversarial_training.lambda_sweep`).
    """
    import ipywidgets as W
    import matplotlib.pyplot as plt
    from IPython.display import display

    lambdas = list(sweep.models)
    if not lambdas:
        raise ValueError("the sweep holds no adversary")
    start = sweep._key(lam) if lam is not None else lambdas[0]
    slider = W.SelectionSlider(options=[(f"{v:g}", v) for v in lambdas], value=start, description="lambda",
                               continuous_update=False)
    label = W.HTML()
    out = W.Output()

    def redraw(*_):
        a = sweep[slider.value]
        label.value = (f"adversary F1 {a.test['f1']:.3f} (base {sweep.base.test['f1']:.3f}); mean attention JSD "
                       f"{a.agreement['jsd']:.3f}, mean output TVD {a.agreement['tvd']:.3f}, same decision "
                       f"{a.agreement['same_decision']:.1%}")
        with out:
            out.clear_output(wait=True)
            for fig in lambda_figures(sweep, indices, slider.value, points=points, split=split, spread=spread):
                display(fig)
                plt.close(fig)

    slider.observe(redraw, names="value")
    redraw()
    return _panel([slider, label, out])


def null_space_figure(trace, tokens: Sequence[Sequence[str]], sentence: int = 0, layer: int = 0, head: int = 0,
                      step: float = 1.0, *, seed: int = 0):
    """A head's attention A, the same output's A + step x A~, and step x A~ (Chapter 11).

    A~ is :func:`attnlib.identifiability.alternative_attention`'s move for that head: along
    the left null space of [T, 1], as far as positivity allows (``step`` = 1). The title
    gives the head's output change max |step A~ T| (T = V W^O, the full value-output matrix)
    against max |A T|, and the mean JSD over the query rows.
    """
    from ..experiments.identifiability import alternative_attention
    from ..metrics import jsd
    from .viz import matrix_heatmaps

    if not 0 <= sentence < len(trace):
        raise ValueError(f"sentence must be in 0..{len(trace) - 1}, got {sentence}")
    if not (0 <= layer < trace.n_layers and 0 <= head < trace.n_heads):
        raise ValueError(f"layer, head must be within {trace.n_layers} x {trace.n_heads}, got ({layer}, {head})")
    if not 0 <= step <= 1:
        raise ValueError(f"step must be in [0, 1] (1: as far as positivity allows), got {step}")
    n = int(trace.lengths[sentence])
    if len(tokens[sentence]) != n:
        raise ValueError(f"sentence {sentence} has {n} positions but {len(tokens[sentence])} tokens")
    # the model's own precision: the rank tolerance is relative to its machine epsilon (float32 T
    # cast to float64 would keep rounding-level singular values as rank)
    A = trace.attentions[sentence, layer, head, :n, :n].cpu().numpy()
    T = trace.value_output(layer)[sentence, head, :n].cpu().numpy()  # (n, d_model)
    alt = alternative_attention(A[None], T[None], seed=seed)
    change = step * alt.change[0]
    moved = np.clip(A + change, 0.0, None)
    out = float(np.abs(change @ T).max())
    scale = float(np.abs(A @ T).max())
    row_jsd = float(np.mean(jsd(A, moved, check=False)))
    title = (f"layer {layer + 1}, head {head + 1}: max |ΔA T| = {out:.1e} (max |A T| = {scale:.2f}); "
             f"mean row JSD(A, A') = {row_jsd:.3f}")
    return matrix_heatmaps({"A (the model's)": A, f"A' = A + {step:.2f} Ã": moved, "A' − A": change},
                           list(tokens[sentence]), diverging=["A' − A"], title=title)


def null_space_explorer(trace, tokens: Sequence[Sequence[str]], sentence: int = 0, layer: int = 0, head: int = 0,
                        *, seed: int = 0):
    """Choose a sentence, a layer and a head, and slide along a null-space direction (:func:`null_space_figure`)."""
    import ipywidgets as W

    options = [(f"{i}: {' '.join(tokens[i][1:7])} ...", i) for i in range(len(trace))]
    pick = W.Dropdown(options=options, value=sentence, description="sentence", layout=_fit())
    # layers and heads counted from 1, as the figures' titles and the prose count them
    lay = W.IntSlider(value=layer + 1, min=1, max=trace.n_layers, description="layer", continuous_update=False,
                      style={"description_width": "110px"}, layout=_slider())
    hd = W.IntSlider(value=head + 1, min=1, max=trace.n_heads, description="head", continuous_update=False,
                     style={"description_width": "110px"}, layout=_slider())
    step = W.FloatSlider(value=1.0, min=0.0, max=1.0, step=0.05, description="step along Ã", continuous_update=False,
                         style={"description_width": "110px"}, layout=_slider())
    out = W.Output()

    def redraw(*_):
        _figure_out(out, lambda: null_space_figure(trace, tokens, pick.value, lay.value - 1, hd.value - 1, step.value,
                                                   seed=seed))

    for w in (pick, lay, hd, step):
        w.observe(redraw, names="value")
    redraw()
    return _panel([pick, W.HBox([lay, hd, step], layout=_wrap()), out])


HEAD_EDITS = ("permute", "ablate")


def head_figure(model, split, index: int = 0, layer: int = 0, head: int = 0, edit: str = "permute", *, seed: int = 0):
    """One head of a transformer on one sentence: its attention, the edited attention, and the output (Chapter 12).

    ``edit``: "permute" (every query row permuted on its own among the real tokens, seeded)
    or "ablate" (the head masked: its rows set to 0, gate xi = 0). The title gives P(positive)
    before and after, and the gold label.
    """
    import torch

    from ..experiments.counterfactual import query_row_sources
    from ..models import Site
    from ..models.interventions import permute_rows
    from .viz import matrix_heatmaps

    if edit not in HEAD_EDITS:
        raise ValueError(f"edit must be one of {HEAD_EDITS}, got {edit!r}")
    if not 0 <= index < len(split):
        raise ValueError(f"index must be in 0..{len(split) - 1}, got {index}")
    site = Site(layer, head)
    if site not in getattr(model, "sites", ()):
        raise ValueError(f"{site} is outside the model")
    batch = split.batch([index])
    trace = model.trace(batch)
    n = int(trace.lengths[0])
    A = trace.attentions[:, layer, head, :n, :n]  # (1, n, n)
    if edit == "permute":
        src = query_row_sources(trace.key_mask[:, :n], n, 1, np.random.default_rng(seed))[:, 0]  # (1, n, n)
        edited = permute_rows(A, src.unsqueeze(1)).squeeze(1)
    else:
        edited = torch.zeros_like(A)
    with torch.no_grad():
        before = float(model(batch).probs[0, -1])
        after = float(model(batch, edits={site: edited}).probs[0, -1])
    tokens = ["[CLS]", *split.tokens[index], "[SEP]"]
    label = int(split.labels[index])
    title = (f"layer {layer + 1}, head {head + 1} ({edit}d): P(positive) {before:.3f} -> {after:.3f}; "
             f"gold label {label}")
    return matrix_heatmaps({"the head's attention": A[0].cpu().numpy(), f"{edit}d": edited[0].cpu().numpy()}, tokens, title=title)


def head_explorer(model, split, indices: Sequence[int], *, index: int | None = None, seed: int = 0):
    """Choose a sentence, a layer, a head and an edit (permute or ablate) and see the attention and output (:func:`head_figure`)."""
    import ipywidgets as W

    indices = list(indices)
    if not indices:
        raise ValueError("indices must name at least one sentence of the split")
    layers = 1 + max(s.layer for s in model.sites)
    heads = 1 + max(s.head for s in model.sites)
    options = [(f"{i}: {' '.join(split.tokens[i][:7])} ...", i) for i in indices]
    pick = W.Dropdown(options=options, value=indices[0] if index is None else index, description="sentence",
                      layout=_fit())
    lay = W.IntSlider(value=1, min=1, max=layers, description="layer", continuous_update=False,
                      style={"description_width": "110px"}, layout=_slider())
    hd = W.IntSlider(value=1, min=1, max=heads, description="head", continuous_update=False,
                     style={"description_width": "110px"}, layout=_slider())
    what = W.ToggleButtons(options=list(HEAD_EDITS), value="permute", description="edit")
    out = W.Output()

    def redraw(*_):
        _figure_out(out, lambda: head_figure(model, split, pick.value, lay.value - 1, hd.value - 1, what.value,
                                             seed=seed))

    for w in (pick, lay, hd, what):
        w.observe(redraw, names="value")
    redraw()
    return _panel([pick, W.HBox([lay, hd], layout=_wrap()), what, out])


def _words_attention(model, batch) -> np.ndarray:
    """The model's attention over the real words of a one-sentence batch, renormalised (as importance() reports it)."""
    import torch

    with torch.no_grad():
        attention = model(batch).attention[0, 1 : int(batch.lengths[0]) - 1].double().cpu().numpy()
    total = attention.sum()
    return attention / total if total > 0 else attention


def deception_figure(models: dict, split, index: int = 0, *, family: str | None = None):
    """One sentence under models trained with different lambdas: attention against gradient importance (Chapter 13).

    ``models``: {family: {lambda: model}} (e.g. "transformer" -> {0.0: model, 1.0: model}); ``family``: which to
    draw (default the first). Rows: per lambda, the model's attention over the words (renormalised) and its
    gradient importance (:func:`attnlib.importance.gradient_importance`); the title marks the impermissible tokens'
    share of each row.
    """
    from ..experiments.importance import gradient_importance
    from .viz import compare_heatmap

    if not isinstance(models, dict) or not models:
        raise ValueError("models must be a non-empty dict {family: {lambda: model}}")
    family = next(iter(models)) if family is None else family
    if family not in models:
        raise ValueError(f"family must be one of {list(models)}, got {family!r}")
    if not 0 <= index < len(split):
        raise ValueError(f"index must be in 0..{len(split) - 1}, got {index}")
    batch = split.batch([index])
    n = int(batch.lengths[0])
    mask = None if split.rationales is None else np.asarray(split.rationales[index], dtype=bool)
    rows = {}
    for lam, model in models[family].items():
        attention = _words_attention(model, batch)
        gradient = gradient_importance(model, batch)[0, 1 : n - 1].double().cpu().numpy()
        for name, w in (("attention", attention), ("gradient", gradient)):
            share = ""
            if mask is not None:
                on = float(np.abs(w)[mask].sum() / max(np.abs(w).sum(), 1e-12))
                share = f" ({on:.0%} on the marked tokens)"
            rows[f"λ = {lam:g}: {name}{share}"] = w
    return compare_heatmap(split.tokens[index], rows, header=family)


def deception_explorer(models: dict, split, indices: Sequence[int], *, family: str | None = None):
    """Choose a sentence and a model family and compare attention with gradients across lambdas (:func:`deception_figure`)."""
    import ipywidgets as W

    indices = list(indices)
    if not indices:
        raise ValueError("indices must name at least one sentence of the split")
    options = [(f"{i}: {' '.join(split.tokens[i][:8])} ...", i) for i in indices]
    pick = W.Dropdown(options=options, value=indices[0], description="sentence", layout=_fit())
    which = W.ToggleButtons(options=list(models), value=family or next(iter(models)), description="model")
    out = W.Output()

    def redraw(*_):
        _figure_out(out, lambda: deception_figure(models, split, pick.value, family=which.value))

    for w in (pick, which):
        w.observe(redraw, names="value")
    redraw()
    return _panel([pick, which, out])


def rollout_figure(model, split, index: int = 0, residual: float = 0.5):
    """One sentence's raw attention, rollout and flow after every layer, with A^'s identity weight ``residual`` (Chapter 14)."""
    from ..experiments.flow import relevance_by_layer
    from .viz import plot_relevance_by_layer

    if not 0 <= index < len(split):
        raise ValueError(f"index must be a sentence of the split, 0..{len(split) - 1}, got {index}")
    res = relevance_by_layer(model, split.subset([index]), residual=residual)
    return plot_relevance_by_layer(list(split.tokens[index]), {m: s[0] for m, s in res.scores.items()},
                                   title=f"residual weight r = {residual:g}: p(positive) = {res.probs[0, -1]:.2f}")


def rollout_explorer(model, split, indices: Sequence[int], *, residual: float = 0.5):
    """Choose a sentence and the residual weight r of A^ = r I + (1 - r) A; see raw attention, rollout and flow."""
    import ipywidgets as W

    indices = list(indices)
    if not indices:
        raise ValueError("indices must name at least one sentence of the split")
    options = [(f"{i}: {' '.join(split.tokens[i][:7])} ...", i) for i in indices]
    pick = W.Dropdown(options=options, value=indices[0], description="sentence", layout=_fit())
    weight = W.FloatSlider(value=residual, min=0.0, max=0.9, step=0.1, description="residual r",
                           continuous_update=False, readout_format=".1f")
    out = W.Output()

    def redraw(*_):
        _figure_out(out, lambda: rollout_figure(model, split, pick.value, weight.value))

    for w in (pick, weight):
        w.observe(redraw, names="value")
    redraw()
    return _panel([pick, weight, out])


def explanation_figure(results: dict, tokens: dict, name: str, index: int = 0, *, methods: Sequence[str] | None = None,
                       rationale: dict | None = None):
    """One sentence shaded by every explanation of one model (Chapter 17): ``results`` maps a model's
    name to its :class:`attnlib.explanations.ExplanationResult`, ``tokens`` the same name to the words
    of every position of the split it explained; ``index`` is the result's row. ``rationale`` (same
    names, per position a bool per word) marks the words that decide the label with a ``*``."""
    from .viz import compare_heatmap

    if name not in results:
        raise ValueError(f"no results for {name!r}; there are {', '.join(results)}")
    result = results[name]
    if not 0 <= index < len(result):
        raise ValueError(f"index must be a row of the result, 0..{len(result) - 1}, got {index}")
    position = int(result.indices[index])
    words = list(tokens[name][position])
    if rationale is not None and name in rationale:
        words = [f"{w}*" if marked else w for w, marked in zip(words, rationale[name][position])]
    shown = [m for m in (methods or result.methods) if m in result.scores]
    return compare_heatmap(words, {m: result.scores[m][index] for m in shown},
                           header=f"{name}, p(class 1) = {result.probs[index, -1]:.2f}")


def explanation_explorer(results: dict, tokens: dict, *, methods: Sequence[str] | None = None,
                         rationale: dict | None = None, index: int = 0):
    """Pick a model and a sentence: every explanation of it side by side (:func:`explanation_figure`)."""
    return _model_instance_explorer(
        results, "ExplanationResult",
        lambda name, i: explanation_figure(results, tokens, name, i, methods=methods, rationale=rationale), index)


__all__ += ["explanation_figure", "explanation_explorer"]

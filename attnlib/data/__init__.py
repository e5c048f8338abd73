"""Data layer: tokenisation, vocabularies, data sets, batching and GloVe embeddings.

Preprocessing follows Jain & Wallace (2019), *Attention is not Explanation*:
lower-case tokens, digit-containing tokens -> ``qqq``, a vocabulary from the
training split only (per-data-set minimum document frequency), ids PAD=0,
UNK=1, SOS=2, EOS=3, every instance wrapped ``<SOS> tokens <EOS>``, per-data-set
length filters, and length-bucketed batches.

Data sets (`available_datasets`): offline ``rt-polarity`` (Rotten Tomatoes
sentences -- an SST stand-in, not SST), ``imdb`` and ``synthetic`` (a marker-word
task with known rationales); online ``sst2``, ``agnews`` and ``20news`` (Hugging
Face ``datasets``; need a network or local ``data_files``). `load_texts` loads your
own two-class texts (a DataFrame, a csv/tsv/json/jsonl/parquet file or a Hugging Face
``datasets.Dataset``, with named text and label columns) on the same pipeline, under
your name. `load_deception` builds Pruthi et al.'s two-sentence task (an
rt-polarity sentence, a separator, an IMDB sentence; the rt tokens marked as
rationales) on the same pipeline.

>>> from attnlib.data import load_dataset, load_texts, glove_embeddings
>>> ds = load_dataset("rt-polarity")                      # doctest: +SKIP
>>> emb, coverage = glove_embeddings(ds.vocab)            # doctest: +SKIP
>>> own = load_texts("food_reviews.csv", text="review", label="score",
...                  positive="great")                    # doctest: +SKIP
>>> for batch in ds.train.batches(32, shuffle=True, seed=epoch): ...  # doctest: +SKIP
"""
from .batching import Batch, collate
from .embeddings import GLOVE_DIM, glove_embeddings
from .online import OFFLINE_ALTERNATIVES, DatasetUnavailableError
from .sources import (
    DECEPTION_SEPARATOR,
    MIN_INSTANCES,
    append_sentence,
    available_datasets,
    load_dataset,
    load_deception,
    load_texts,
    RawTexts,
    read_texts,
    sample_texts,
)
from .splits import Dataset, Split, stratified_positions
from .synthetic import (
    DISTRACTORS,
    MARKER_POLARITY,
    NEGATIVE_MARKERS,
    NEGATORS,
    POSITIVE_MARKERS,
    SyntheticData,
    effective_polarity,
    make_synthetic,
    needle_sentence,
)
from .text import DIGIT_TOKEN, EOS, PAD, SOS, SPECIALS, UNK, Vocabulary, tokenize

__all__ = [
    "PAD",
    "UNK",
    "SOS",
    "EOS",
    "SPECIALS",
    "DIGIT_TOKEN",
    "tokenize",
    "Vocabulary",
    "Split",
    "Batch",
    "Dataset",
    "stratified_positions",
    "load_dataset",
    "load_texts",
    "read_texts",
    "RawTexts",
    "MIN_INSTANCES",
    "sample_texts",
    "load_deception",
    "append_sentence",
    "DECEPTION_SEPARATOR",
    "available_datasets",
    "glove_embeddings",
    "GLOVE_DIM",
    "collate",
    "DatasetUnavailableError",
    "OFFLINE_ALTERNATIVES",
    "make_synthetic",
    "NEGATORS",
    "effective_polarity",
    "needle_sentence",
    "SyntheticData",
    "POSITIVE_MARKERS",
    "NEGATIVE_MARKERS",
    "MARKER_POLARITY",
    "DISTRACTORS",
]

"""Tokenisation and vocabularies (Jain & Wallace 2019 preprocessing).

The rules, in order (`tokenize` and the vectorised corpus path share them, so a
text gets the same tokens whichever way it is processed):

1. HTML line breaks (``<br />`` and friends) and a few inline formatting tags
   (``<i>``, ``<em>``, ``<hr>`` ...) become spaces.
2. Typographic characters are normalised: curly quotes and the Windows-1252
   bytes IMDB is littered with (``\\x91``-``\\x97``) become ``'`` / ``"`` /
   ``-`` / ``--``, and an ellipsis becomes ``...``.
3. The text is lower-cased and split on whitespace.
4. Each whitespace chunk is split further with a simple regex: punctuation
   becomes its own token (runs of dots become ``...``, runs of dashes ``--``),
   hyphenated compounds are split at the hyphen (``well - made``), and the
   English clitics are split off the way the Penn Treebank, spaCy and GloVe do
   (``doesn't`` -> ``does n't``, ``film's`` -> ``film 's``).
5. Any token containing a digit becomes ``qqq`` (``1999``, ``5.99``, ``10/10``,
   ``21st``), exactly Jain & Wallace's rule.

No spaCy: a regex tokenizer is fast, dependency-free and close enough (it
differs from spaCy only in rare corner cases).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from .._checks import check_positive_int

__all__ = ["PAD", "UNK", "SOS", "EOS", "SPECIALS", "DIGIT_TOKEN", "tokenize", "Vocabulary"]

PAD, UNK, SOS, EOS = 0, 1, 2, 3
SPECIALS = ["<PAD>", "<UNK>", "<SOS>", "<EOS>"]
N_SPECIALS = len(SPECIALS)
#: what every digit-containing token becomes (Jain & Wallace's placeholder)
DIGIT_TOKEN = "qqq"

_TAG = re.compile(
    r"<\s*br\s*/?\s*>|</?\s*(?:i|b|u|em|strong|hr|p|div|span|font|spoiler)\b[^<>]{0,40}>",
    re.IGNORECASE,
)
_TYPOGRAPHY = {
    "\x91": "'", "\x92": "'", "\u2018": "'", "\u2019": "'", "\u00b4": "'", "\u2032": "'",
    "\x93": '"', "\x94": '"', "\u201c": '"', "\u201d": '"',
    "\x96": "-", "\u2013": "-", "\u2010": "-", "\u2011": "-",
    "\x97": "--", "\u2014": "--",
    "\x85": "...", "\u2026": "...",
}
_TYPOGRAPHY_RE = re.compile("[" + "".join(_TYPOGRAPHY) + "]")
# A "word" may carry internal hyphens, apostrophes and number punctuation; it is
# split further by _split_word. Everything else that is not a letter, digit or
# space is a token of its own, except runs of . - ! ? which stay together.
_TOKEN = re.compile(r"\w+(?:[-'.,:/]\w+)*|'(?:s|re|ve|ll|d|m)\b|\.{2,}|-{2,}|!{2,}|\?{2,}|[^\w\s]")
_CLITIC = re.compile(r"^(.+?)(n't|'s|'re|'ve|'ll|'d|'m)$")
_WORD_SEP = re.compile(r"([.,:/])")
_BLOCK_CHARS = 1 << 22  # the corpus path tokenises about this many characters at a time


_ASCII_DIGIT = re.compile(r"[0-9]")


def _has_digit(s: str) -> bool:
    """Whether any character of ``s`` is a digit (``str.isdigit``, as Jain & Wallace test it)."""
    if s.isascii():
        return _ASCII_DIGIT.search(s) is not None
    return any(c.isdigit() for c in s)


def _split_clitic(piece: str) -> list[str]:
    m = _CLITIC.match(piece)
    return [m.group(1), m.group(2)] if m else [piece]


def _split_word(word: str) -> list[str]:
    out: list[str] = []
    for k, seg in enumerate(word.split("-")):
        if k:
            out.append("-")
        if _has_digit(seg):
            # "1990's" -> qqq 's ; "5.99", "10/10", "21st" -> qqq
            m = _CLITIC.match(seg)
            out.extend([DIGIT_TOKEN, m.group(2)] if m and not _has_digit(m.group(2)) else [DIGIT_TOKEN])
            continue
        for piece in _WORD_SEP.split(seg):
            if piece:
                out.extend(_split_clitic(piece))
    return out


def _is_punct(c: str) -> bool:
    """A character that is a token on its own: neither word character nor space."""
    return not (c.isalnum() or c == "_" or c.isspace())


def _split_chunk(chunk: str) -> tuple[str, ...]:
    """Tokens of one lower-cased, whitespace-free chunk (shortcuts for the common cases)."""
    if chunk.isalpha():  # a plain word
        return (chunk,)
    # a word with one punctuation mark attached: "film," "(the"
    if len(chunk) > 1:
        if chunk[:-1].isalpha() and _is_punct(chunk[-1]):
            return (chunk[:-1], chunk[-1])
        if chunk[1:].isalpha() and chunk[0] != "'" and _is_punct(chunk[0]):
            return (chunk[0], chunk[1:])
    return _split_chunk_regex(chunk)


def _split_chunk_regex(chunk: str) -> tuple[str, ...]:
    """Tokens of one lower-cased, whitespace-free chunk: the general rule."""
    out: list[str] = []
    for tok in _TOKEN.findall(chunk):
        c = tok[0]
        if c.isalnum() or c == "_":
            out.extend(_split_word(tok))  # the only place digits can be
        elif c == "." and len(tok) > 1:
            out.append("...")
        elif c == "-" and len(tok) > 1:
            out.append("--")
        else:
            out.append(tok)
    return tuple(out)


_split_chunk_cached = functools.lru_cache(maxsize=1 << 15)(_split_chunk)


def _normalize(text: str) -> str:
    if "<" in text:
        text = _TAG.sub(" ", text)
    if not text.isascii():
        text = _TYPOGRAPHY_RE.sub(lambda m: _TYPOGRAPHY[m.group()], text)
    return text.lower()


def _check_text(text, where: str = "") -> None:
    if not isinstance(text, str):
        raise ValueError(f"tokenize() needs a str{where}, got {type(text).__name__}: {text!r:.60}")
    if not text.strip():
        raise ValueError(f"cannot tokenize empty or whitespace-only text{where}: {text!r:.60}")


def tokenize(text: str) -> list[str]:
    """Jain & Wallace-style tokens of ``text`` (see the module docstring for the rules).

    >>> tokenize("The 21st century's new <br />\\"Conan\\" isn't bad!!")
    ['the', 'qqq', 'century', "'s", 'new', '"', 'conan', '"', 'is', "n't", 'bad', '!!']

    Raises ValueError for a non-str, empty or whitespace-only text, or one with
    no tokens left once HTML tags are removed.
    """
    _check_text(text)
    out: list[str] = []
    for chunk in _normalize(text).split():
        out.extend(_split_chunk_cached(chunk))
    if not out:
        raise ValueError(f"text has no tokens once HTML tags are removed: {text!r:.60}")
    return out


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while building millions of small lists.

    The collector would otherwise re-scan the growing lists over and over,
    which costs a sizeable fraction of the tokenising time on large corpora.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Corpus:
    """Many tokenised documents stored flat: ``types[codes[offsets[i]:offsets[i+1]]]``.

    Internal, vectorised workhorse behind `load_dataset` and
    `Vocabulary.from_documents`: tokenisation touches each distinct
    whitespace chunk once, and filtering, document frequencies and encoding are
    NumPy operations rather than per-token Python loops.
    """

    __slots__ = ("types", "codes", "offsets")

    def __init__(self, types: np.ndarray, codes: np.ndarray, offsets: np.ndarray):
        self.types = types  # object array of distinct token strings
        self.codes = codes  # int32, index into types, all documents back to back
        self.offsets = offsets  # int64, len n_docs + 1

    # -- construction -------------------------------------------------------
    @classmethod
    def from_token_lists(cls, docs: Sequence[Sequence[str]]) -> "Corpus":
        docs = list(docs)
        for i, d in enumerate(docs):
            if isinstance(d, str) or not isinstance(d, Sequence):
                raise ValueError(f"document {i} must be a list of token strings, got {type(d).__name__}")
        lens = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        flat = list(itertools.chain.from_iterable(docs))
        for t in flat:
            if not isinstance(t, str):
                raise ValueError(f"tokens must be str, got {type(t).__name__}: {t!r:.40}")
        table = dict.fromkeys(flat)
        for i, k in enumerate(table):
            table[k] = i
        codes = np.fromiter(map(table.__getitem__, flat), dtype=np.int32, count=len(flat))
        types = np.empty(len(table), dtype=object)
        types[:] = list(table)
        offsets = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        return cls(types, codes, offsets)

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> "Corpus":
        """Tokenise many texts; empty results are allowed here (callers filter)."""
        with gc_paused():
            return cls._from_texts(texts)

    @classmethod
    def _from_texts(cls, texts: Sequence[str]) -> "Corpus":
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValueError(f"text {i} is not a str: {type(t).__name__}")
        n = len(texts)
        # Pass 1, a block of texts at a time: whitespace chunks -> distinct-chunk ids.
        # (A defaultdict whose factory is a C counter numbers new chunks in C.)
        chunk_table: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        chain = itertools.chain.from_iterable
        blocks: list[tuple[int, int, np.ndarray, np.ndarray]] = []
        i = 0
        while i < n:
            j, size = i, 0
            while j < n and (j == i or size < _BLOCK_CHARS):
                size += len(texts[j])
                j += 1
            docs = [_normalize(t).split() for t in texts[i:j]]
            chunk_bounds = np.zeros(j - i + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, docs), dtype=np.int64, count=j - i), out=chunk_bounds[1:])
            cc = np.fromiter(map(chunk_table.__getitem__, chain(docs)), dtype=np.int64, count=int(chunk_bounds[-1]))
            blocks.append((i, j, cc, chunk_bounds))
            del docs
            i = j
        # Each distinct chunk -> its tokens, once.
        pieces = [_split_chunk(c) for c in chunk_table]
        del chunk_table
        counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        ttable: dict[str, int] = {}  # token -> code
        piece_codes = np.fromiter(
            (ttable.setdefault(t, len(ttable)) for p in pieces for t in p), dtype=np.int32, count=int(counts.sum())
        )
        del pieces
        starts = np.cumsum(counts) - counts  # first entry in piece_codes of each distinct chunk
        # Pass 2, block by block (small temporaries): chunk ids -> token codes.
        code_blocks: list[np.ndarray] = []
        doc_lengths = np.zeros(n, dtype=np.int64)
        for i, j, cc, chunk_bounds in blocks:
            per_chunk = counts[cc]
            tok_end = np.cumsum(per_chunk)
            if (per_chunk == 1).all():
                block = piece_codes[starts[cc]]
            else:
                first = np.repeat(starts[cc] - (tok_end - per_chunk), per_chunk)
                first += np.arange(len(first))
                block = piece_codes[first]
            code_blocks.append(block)
            tok_bounds = np.concatenate([[0], tok_end])
            doc_lengths[i:j] = np.diff(tok_bounds[chunk_bounds])
        codes = np.concatenate(code_blocks) if code_blocks else np.empty(0, dtype=np.int32)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(doc_lengths, out=offsets[1:])
        types = np.empty(len(ttable), dtype=object)
        types[:] = list(ttable)
        return cls(types, codes, offsets)

    # -- access ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def gather(self, docs) -> tuple[np.ndarray, np.ndarray]:
        """(flat codes of ``docs`` in that order, their lengths)."""
        docs = np.asarray(docs, dtype=np.int64)
        starts = self.offsets[docs]
        lens = self.offsets[docs + 1] - starts
        total = int(lens.sum())
        ends = np.cumsum(lens)
        pos = np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lens), lens)
        return self.codes[pos], lens

    def token_lists(self, docs) -> list[list[str]]:
        codes, lens = self.gather(docs)
        flat = self.types[codes].tolist()
        b = np.concatenate([[0], np.cumsum(lens)]).tolist()
        return [flat[b[i] : b[i + 1]] for i in range(len(lens))]

    def keys(self, docs) -> list[bytes]:
        """Hashable keys, equal iff two documents have the same token sequence."""
        o, c = self.offsets, self.codes
        return [c[o[d] : o[d + 1]].tobytes() for d in np.asarray(docs, dtype=np.int64).tolist()]

    def doc_freq(self, docs=None) -> np.ndarray:
        """Number of documents (among ``docs``) each type occurs in."""
        if docs is None:
            docs = np.arange(len(self))
        codes, lens = self.gather(docs)
        n_types = len(self.types)
        if len(codes) == 0:
            return np.zeros(n_types, dtype=np.int64)
        doc_id = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
        pairs = pd.unique(doc_id * n_types + codes.astype(np.int64))
        return np.bincount(pairs % n_types, minlength=n_types)

    def encode(self, docs, lookup: np.ndarray) -> list[np.ndarray]:
        """Ids (with SOS/EOS) of ``docs``; ``lookup[type code] -> vocabulary id``."""
        codes, lens = self.gather(docs)
        n = len(lens)
        out = np.empty(len(codes) + 2 * n, dtype=np.int64)
        out_end = np.cumsum(lens + 2)
        out[out_end - lens - 2] = SOS
        out[out_end - 1] = EOS
        out[np.arange(len(codes)) + 2 * np.repeat(np.arange(n), lens) + 1] = lookup[codes]
        return np.split(out, out_end[:-1]) if n else []


class Vocabulary:
    """Token <-> id mapping with Jain & Wallace's specials at ids 0-3.

    ``itos[i]`` is the token with id ``i``; ``stoi`` the reverse dict. Build one
    from training documents with `from_documents`. Words are ordered by
    document frequency (descending), ties alphabetically, so the same
    documents always give the same ids.
    """

    def __init__(self, itos: Sequence[str]):
        itos = list(itos)
        if itos[:N_SPECIALS] != SPECIALS:
            raise ValueError(f"a vocabulary must start with the specials {SPECIALS}, got {itos[:N_SPECIALS]}")
        if not all(isinstance(w, str) for w in itos):
            raise ValueError("vocabulary entries must be str")
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(itos)}
        if len(self.stoi) != len(itos):
            raise ValueError("vocabulary entries must be unique")
        self._index: pd.Index | None = None

    @classmethod
    def from_documents(
        cls, documents: Iterable[Sequence[str]], min_df: int = 1, *, max_size: int | None = None
    ) -> "Vocabulary":
        """Vocabulary of the tokens occurring in at least ``min_df`` documents.

        ``documents`` are token lists (e.g. the *training* split's ``tokens``;
        never build a vocabulary from dev/test). ``max_size`` caps the number of
        non-special words, keeping the most frequent.
        """
        check_positive_int(min_df, "min_df", minimum=1)
        if max_size is not None:
            check_positive_int(max_size, "max_size", minimum=0)
        with gc_paused():
            corpus = Corpus.from_token_lists(list(documents))
            return cls._from_doc_freq(corpus.types, corpus.doc_freq(), min_df, max_size)

    @classmethod
    def _from_doc_freq(cls, types: np.ndarray, df: np.ndarray, min_df: int, max_size: int | None = None):
        keep = df >= min_df
        words = pd.DataFrame({"w": types[keep], "df": df[keep]})
        words = words[~words["w"].isin(SPECIALS)]
        words = words.sort_values(["df", "w"], ascending=[False, True], kind="stable")
        if max_size is not None:
            words = words.iloc[:max_size]
        return cls(SPECIALS + words["w"].tolist())

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word) -> bool:
        return word in self.stoi

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.itos == other.itos

    __hash__ = None  # mutable-looking container

    def __repr__(self) -> str:
        head = ", ".join(self.itos[N_SPECIALS : N_SPECIALS + 6])
        return f"Vocabulary({len(self)} entries: {N_SPECIALS} specials + {head}, ...)"

    @property
    def words(self) -> list[str]:
        """The non-special entries."""
        return self.itos[N_SPECIALS:]

    def lookup(self, tokens: Sequence[str]) -> np.ndarray:
        """Ids of ``tokens`` (no SOS/EOS); unknown words and special strings -> UNK."""
        if self._index is None:
            self._index = pd.Index(np.asarray(self.itos, dtype=object))
        ids = self._index.get_indexer(np.asarray(list(tokens), dtype=object)).astype(np.int64)
        ids[ids < N_SPECIALS] = UNK
        return ids

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """int64 ids of ``tokens`` wrapped as ``<SOS> tokens <EOS>``; unknown words -> UNK."""
        if isinstance(tokens, str):
            raise ValueError("encode() takes a list of tokens; call tokenize(text) first")
        get = self.stoi.get
        ids = [get(t, UNK) for t in tokens]
        out = np.empty(len(ids) + 2, dtype=np.int64)
        out[0], out[-1] = SOS, EOS
        if ids:
            body = np.asarray(ids, dtype=np.int64)
            body[body < N_SPECIALS] = UNK  # a literal "<PAD>" in the text is just an unknown word
            out[1:-1] = body
        return out

    def encode_many(self, documents: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """`encode` for many token lists at once (vectorised)."""
        corpus = Corpus.from_token_lists(documents)
        lookup = self.lookup(corpus.types) if len(corpus.types) else np.empty(0, dtype=np.int64)
        return corpus.encode(np.arange(len(corpus)), lookup)

    def decode(self, ids, *, keep_specials: bool = False) -> list[str]:
        """Tokens of ``ids`` (array, list or tensor).

        By default the structural specials PAD, SOS and EOS are dropped; UNK is
        kept (as ``"<UNK>"``) because it stands for a real token, so positions
        stay aligned with ``tokens`` and attention weights.
        """
        if hasattr(ids, "detach"):
            ids = ids.detach().cpu().numpy()
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise ValueError(f"decode() takes a 1-d sequence of ids, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"ids must be integers, got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= len(self.itos)):
            raise ValueError(f"ids must lie in [0, {len(self.itos)}), got range [{arr.min()}, {arr.max()}]")
        if not keep_specials:
            arr = arr[(arr != PAD) & (arr != SOS) & (arr != EOS)]
        itos = self.itos
        return [itos[i] for i in arr.tolist()]


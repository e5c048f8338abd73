"""What each chapter reads off its results, computed here rather than in the notebook.

A chapter's prose quotes its run: "the adversary beats the seeds on {ch07_beats_all:.0%} of the
sentences". The numbers and the clauses that depend on them ("higher than", "about as well
as") are computed by one function per paragraph, in the chapter's module here
(``readings.ch07.floor(both, eps=..., n_seeds=...)``). It takes the chapter's results (frames,
tables, result objects) and returns a dict ``{glued name: value}``; the chapter glues it with
:func:`attnlib.presentation.glue.glue_all` and a prose cell quotes it.

So a chapter defines nothing (``tests/test_layout.py``), every wording rule has a unit test on
a small frame (``tests/test_readings.py``), and a reader who re-runs a chapter with another seed
gets prose that follows the new numbers. Helpers shared by chapters (a list in words, a
comparison in words) are in :mod:`.wording`.
"""

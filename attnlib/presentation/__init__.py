"""Figures (:mod:`.viz`), widgets (:mod:`.widgets`) and exercise checkers (:mod:`.exercises`).

Nothing here trains or computes a result the book reports, so edits to this package keep the
model cache (:func:`attnlib.cache.code_version` leaves this folder out of its hash).
"""

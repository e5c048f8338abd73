"""Checkers for the chapters' exercises.

Each ``check_*`` function takes the student's function, runs it on seeded cases
(including the edge cases the chapter warns about), compares it with attnlib's
reference implementation, and returns a :class:`CheckResult`: truthy when every case
passes, and shown as a one-line verdict when it is a cell's last expression. It never
raises for a wrong answer, so a notebook keeps running. An answer that is attnlib's own
function (``my_tvd = tvd``) is reported as such and does not pass.

Each checker's :class:`Spec` can be built on cases drawn from any seed (``SPECS[name](seed)``;
None gives the book's own cases, which the check cells use). ``tools/grade.py`` judges a hand-in
with it in two processes: a fresh sandboxed one calls the student's function, taken from the
notebook's source, on the cases of a seed picked for that student, with only the modules of
attnlib the Spec allows (``Spec.modules``: never this package, its cases or the exercise's
reference), and sends back numbers; the grader's own compares them with the reference
(:func:`judge`, :func:`as_answer`). :mod:`.fixtures` is what some cases are made of, and all of
this package that the judging process may import. :func:`record_answers` and
:func:`judge_recorded` do the same through a folder of numbers (JSON and ``.npz`` without
pickles, sizes checked before loading), for use outside the grader.
:data:`SPECS` maps each checker's name to the function that builds its :class:`Spec`.

The machinery is in :mod:`.core`; each part's checkers (their cases and references) are in
:mod:`.part1` ... :mod:`.part5`, so a new chapter's exercise adds to its part's module.
"""
from __future__ import annotations

from . import core, fixtures, part1, part2, part3, part4, part5
from .core import (ANSWER_KINDS, MAX_ANSWER_BYTES, SPECS, Answer, CheckResult, Recorded, Spec, answers_of,
                   as_answer, case_generator, case_rng, check_against, judge, judge_recorded, make_checker,
                   read_answers, record_answers, shorten)

for _part in (part1, part2, part3, part4, part5):
    SPECS.update(_part.SPECS)
del _part

check_tvd = make_checker('check_tvd', SPECS['check_tvd'])
check_jsd = make_checker('check_jsd', SPECS['check_jsd'])
check_kendall_tau = make_checker('check_kendall_tau', SPECS['check_kendall_tau'])
check_masked_softmax = make_checker('check_masked_softmax', SPECS['check_masked_softmax'])
check_context = make_checker('check_context', SPECS['check_context'])
check_leave_one_out = make_checker('check_leave_one_out', SPECS['check_leave_one_out'])
check_gradient_importance = make_checker('check_gradient_importance', SPECS['check_gradient_importance'])
check_permutation = make_checker('check_permutation', SPECS['check_permutation'])
check_binned_medians = make_checker('check_binned_medians', SPECS['check_binned_medians'])
check_eps_max_jsd = make_checker('check_eps_max_jsd', SPECS['check_eps_max_jsd'])
check_pairwise_jsd = make_checker('check_pairwise_jsd', SPECS['check_pairwise_jsd'])
check_uniform_attention = make_checker('check_uniform_attention', SPECS['check_uniform_attention'])
check_f1 = make_checker('check_f1', SPECS['check_f1'])
check_median_jsd_over_seeds = make_checker('check_median_jsd_over_seeds', SPECS['check_median_jsd_over_seeds'])
check_noise_floor_fraction = make_checker('check_noise_floor_fraction', SPECS['check_noise_floor_fraction'])
check_masked_kl = make_checker('check_masked_kl', SPECS['check_masked_kl'])
check_adversarial_loss = make_checker('check_adversarial_loss', SPECS['check_adversarial_loss'])
check_guided_context = make_checker('check_guided_context', SPECS['check_guided_context'])
check_guide_gain = make_checker('check_guide_gain', SPECS['check_guide_gain'])
check_erase = make_checker('check_erase', SPECS['check_erase'])
check_first_flip_fraction = make_checker('check_first_flip_fraction', SPECS['check_first_flip_fraction'])
check_null_dim = make_checker('check_null_dim', SPECS['check_null_dim'])
check_effective_attention = make_checker('check_effective_attention', SPECS['check_effective_attention'])
check_head_permutation = make_checker('check_head_permutation', SPECS['check_head_permutation'])
check_head_importance = make_checker('check_head_importance', SPECS['check_head_importance'])
check_attention_mass = make_checker('check_attention_mass', SPECS['check_attention_mass'])
check_impermissible_penalty = make_checker('check_impermissible_penalty', SPECS['check_impermissible_penalty'])
check_augmented_attention = make_checker('check_augmented_attention', SPECS['check_augmented_attention'])
check_rollout = make_checker('check_rollout', SPECS['check_rollout'])
check_erasure_one_instance = make_checker('check_erasure_one_instance', SPECS['check_erasure_one_instance'])
check_aopc = make_checker('check_aopc', SPECS['check_aopc'])
check_null_space_share = make_checker('check_null_space_share', SPECS['check_null_space_share'])
check_ranks_with_ties = make_checker('check_ranks_with_ties', SPECS['check_ranks_with_ties'])
check_norm_attention = make_checker('check_norm_attention', SPECS['check_norm_attention'])
check_relevance = make_checker('check_relevance', SPECS['check_relevance'])
check_feature_agreement = make_checker('check_feature_agreement', SPECS['check_feature_agreement'])
check_rank_agreement = make_checker('check_rank_agreement', SPECS['check_rank_agreement'])

__all__ = [
    "CheckResult",
    "Spec",
    "Answer",
    "SPECS",
    "answers_of",
    "as_answer",
    "case_rng",
    "case_generator",
    "judge",
    "record_answers",
    "read_answers",
    "judge_recorded",
    "Recorded",
    "check_tvd",
    "check_jsd",
    "check_kendall_tau",
    "check_masked_softmax",
    "check_context",
    "check_leave_one_out",
    "check_gradient_importance",
    "check_permutation",
    "check_binned_medians",
    "check_eps_max_jsd",
    "check_pairwise_jsd",
    "check_uniform_attention",
    "check_f1",
    "check_median_jsd_over_seeds",
    "check_noise_floor_fraction",
    "check_masked_kl",
    "check_adversarial_loss",
    "check_guided_context",
    "check_guide_gain",
    "check_erase",
    "check_first_flip_fraction",
    "check_null_dim",
    "check_effective_attention",
    "check_head_permutation",
    "check_head_importance",
    "check_attention_mass",
    "check_impermissible_penalty",
    "check_augmented_attention",
    "check_rollout",
    "check_erasure_one_instance",
    "check_aopc",
    "check_null_space_share",
    "check_ranks_with_ties",
    "check_norm_attention",
    "check_relevance",
    "check_feature_agreement",
    "check_rank_agreement",
]

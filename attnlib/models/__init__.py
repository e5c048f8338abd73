"""The model families behind attnlib's one intervention interface.

``attnlib.models`` is what the experiments need from a model (:mod:`.protocol`), the
edits they make to attention (:mod:`.interventions`), and the families that meet the
protocol: today J&W's single-attention classifier (:mod:`.classifier`).
"""
from . import classifier, interventions, protocol
from .classifier import *  # noqa: F401,F403  (ModelConfig, AttentionClassifier, masked_softmax, ...)
from .protocol import ONLY_SITE, InterventionModel, Site, SiteState, check_model, device_of

__all__ = [*classifier.__all__, "Site", "ONLY_SITE", "SiteState", "InterventionModel", "check_model", "device_of"]

"""The model families behind attnlib's one intervention interface.

``attnlib.models`` is what the experiments need from a model (:mod:`.protocol`), the
edits they make to attention (:mod:`.interventions`), and the families that meet the
protocol: today J&W's single-attention classifier (:mod:`.classifier`).
"""
from .classifier import (
    ATTENTIONS,
    ENCODERS,
    AttentionClassifier,
    Encoded,
    ModelConfig,
    Output,
    eval_mode,
    masked_softmax,
    real_token_mask,
    uniform_attention,
)
from .protocol import ONLY_SITE, InterventionModel, Site, SiteState, check_model, device_of

__all__ = [
    "ENCODERS",
    "ATTENTIONS",
    "ModelConfig",
    "Encoded",
    "Output",
    "AttentionClassifier",
    "real_token_mask",
    "masked_softmax",
    "uniform_attention",
    "eval_mode",
    "Site",
    "ONLY_SITE",
    "SiteState",
    "InterventionModel",
    "check_model",
    "device_of",
]

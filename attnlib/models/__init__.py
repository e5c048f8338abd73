"""The model families behind attnlib's one intervention interface.

``attnlib.models`` is what the experiments need from a model (:mod:`.protocol`), the
edits they make to attention (:mod:`.interventions`), and the families that meet the
protocol: J&W's single-attention classifier (:mod:`.classifier`), the book's small
transformer trained from scratch (:mod:`.transformer`) and any pretrained BERT-family model
(:mod:`.pretrained`, all-MiniLM-L6-v2 by default); the two transformer families share their
trace and edits (:mod:`.heads`).
"""
from . import classifier, heads, interventions, pretrained, protocol, transformer
from .classifier import *  # noqa: F401,F403  (ModelConfig, AttentionClassifier, masked_softmax, ...)
from .heads import Trace
from .pretrained import PretrainedClassifier, minilm_path
from .protocol import ONLY_SITE, InterventionModel, Site, SiteState, check_model, device_of
from .transformer import TransformerClassifier, TransformerConfig, TransformerOutput

__all__ = [*classifier.__all__, "Site", "ONLY_SITE", "SiteState", "InterventionModel", "check_model", "device_of",
           "Trace", "TransformerConfig", "TransformerClassifier", "TransformerOutput",
           "PretrainedClassifier", "minilm_path"]

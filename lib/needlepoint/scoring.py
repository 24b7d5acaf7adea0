"""Stable import path for strict scoring; it lives in ``needlepoint.run.scoring``."""

from needlepoint.run.scoring import classify, java_trim, score_text

__all__ = ["classify", "java_trim", "score_text"]

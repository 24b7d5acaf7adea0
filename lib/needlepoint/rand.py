"""Stable import path for the Java-compatible generator; it lives in ``needlepoint.design``."""

from needlepoint.design.random import JavaRandom, shuffle

__all__ = ["JavaRandom", "shuffle"]

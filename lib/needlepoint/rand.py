"""Stable import path for the Java-compatible generator; it lives in ``needlepoint.design``."""

from needlepoint.design.java_random import JavaRandom, shuffle

__all__ = ["JavaRandom", "shuffle"]

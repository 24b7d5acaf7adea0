"""Interop with the harnesses evaluation engineers already run (inspect_ai).

``export`` writes a frozen design as a self-contained inspect_ai task; ``inspect_log`` reads an
inspect log back, one verified sample at a time, into a run folder that ``analyze``, ``compare``
and ``registry`` read like any other, labelled as executed elsewhere. docs/interop.md says what
each direction verifies and what it cannot.
"""

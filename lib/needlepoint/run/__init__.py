"""Run: settings, transport, the run loop, the journal, the run folder, results and run audit.

The second stage: a prepared folder becomes a run folder whose hash-chained journal is the only
source of truth. It imports from ``design`` and never from a later stage.
"""

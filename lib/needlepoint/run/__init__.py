"""Run: a prepared folder becomes a run folder whose hash-chained journal is the only truth."""

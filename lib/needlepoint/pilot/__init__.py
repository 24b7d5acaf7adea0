"""Pilot and calibrate: held-out materials that choose lengths and a case count before a run.

A pilot runs the design on materials from another seed that share no target name and no code
with it; ``calibrate`` reads the pilot and writes a new protocol version whose rationale records
the pilot, the chosen lengths and the power table. See docs/pilot.md.
"""

"""The study record: declarations bound to runs, every run of a design, fresh materials.

It reads the stages below it (prepared folders, runs, pilots, analyses, comparisons) under an
evidence root and answers what the record holds: `declare` writes what results existed when a
plan was written, `registry` lists every run of every design with its decision, and the
freshness checks keep a new design version from asking what a run on record already asked.
"""

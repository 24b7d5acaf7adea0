"""Design: a protocol becomes a prepared folder of frozen requests, verified and audited.

The first stage of the data path: ``protocol`` (parameters, validation, design fingerprint),
``schema`` (the documented shape of every design file), ``profiles`` (request bodies),
``generate`` (materials, execution order, the data files' bytes), ``prepared`` (the folder:
written with its manifest, loaded), ``verify`` (regenerated and compared; ``dry-run``) and
``audit`` (the independent checks). Nothing here imports from a later stage.
"""

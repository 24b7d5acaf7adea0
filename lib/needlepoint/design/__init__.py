"""Design: the protocol, the Java-compatible generator, materials, order, freeze and audit.

The first stage of the data path: a protocol file becomes a prepared folder of frozen,
fingerprinted requests. Nothing here imports from a later stage.
"""

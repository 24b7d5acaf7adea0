"""Decompression bombs built in milliseconds, for the hostile-server tests and the benchmark.

Compressing a gigabyte of zeros takes the better part of a minute; these builders compress one
MiB once and repeat the compressed blocks. A full flush ends every repeated block on a byte
boundary with an empty dictionary, so the repetition is itself a valid deflate stream; gzip's
trailer (CRC-32 and size) is computed over the repeated data without ever holding it.
"""

from __future__ import annotations

import struct
import zlib

_MIB = 1 << 20


def _raw_blocks(chunk: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)


def _final_block() -> bytes:
    return zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS).flush(zlib.Z_FINISH)


def deflate_raw(total: int, fill: bytes = b"\0") -> bytes:
    """Raw deflate (no zlib wrapper) of ``total`` bytes of ``fill``, a multiple of 1 MiB."""
    assert total % _MIB == 0
    return _raw_blocks(fill * _MIB) * (total // _MIB) + _final_block()


def gzip_bomb(total: int, fill: bytes = b"\0") -> bytes:
    """One gzip member that decodes to ``total`` bytes of ``fill`` (a multiple of 1 MiB)."""
    chunk = fill * _MIB
    crc = 0
    for _ in range(total // _MIB):
        crc = zlib.crc32(chunk, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, total & 0xFFFFFFFF)
    return header + deflate_raw(total, fill) + trailer

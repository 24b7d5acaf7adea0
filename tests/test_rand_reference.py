"""JavaRandom against a plain transcription of OpenJDK 17's ``java.util.Random`` source.

The transcription below shares no code with ``needlepoint.rand``: it keeps Java's
statements as they are and gets Java's 32- and 64-bit wrap-around from ``struct``. Hypothesis
compares the two over the whole seed and bound range, with extra weight on bounds near 2**31,
where ``nextInt``'s rejection loop runs; the recorded JVM vectors pin the same branch.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from needlepoint.cli.selftest import java_vectors
from needlepoint.rand import JavaRandom, _to_int32, _to_int64, shuffle

FUZZ = settings(derandomize=True, max_examples=300, deadline=None)


def int32(v: int) -> int:
    """Java's (int) cast: the low 32 bits, two's complement."""
    return struct.unpack("<i", struct.pack("<I", v % 2**32))[0]


def int64(v: int) -> int:
    """Java's (long) cast: the low 64 bits, two's complement."""
    return struct.unpack("<q", struct.pack("<Q", v % 2**64))[0]


class Reference:
    """``java.util.Random`` statement by statement (OpenJDK 17, src/java.base/.../Random.java)."""

    def __init__(self, seed: int) -> None:
        self.seed = (int64(seed) ^ 0x5DEECE66D) & ((1 << 48) - 1)  # initialScramble

    def next(self, bits: int) -> int:
        self.seed = (self.seed * 0x5DEECE66D + 0xB) & ((1 << 48) - 1)
        return int32(self.seed >> (48 - bits))  # (int)(nextseed >>> (48 - bits))

    def nextInt(self, bound: int | None = None) -> int:
        if bound is None:
            return self.next(32)
        r = self.next(31)
        m = bound - 1
        if (bound & m) == 0:  # i.e., bound is a power of 2
            return int32(int64(bound * r) >> 31)
        # for (int u = r; u - (r = u % bound) + m < 0; u = next(31));
        u = r
        while True:
            r = u % bound
            if int32(u - r + m) >= 0:
                return r
            u = self.next(31)


def reference_shuffle(items: list, rnd: Reference) -> None:
    """Collections.shuffle for a RandomAccess list: for i = size..2, swap(i - 1, nextInt(i))."""
    for i in range(len(items), 1, -1):
        j = rnd.nextInt(i)
        items[i - 1], items[j] = items[j], items[i - 1]


SEEDS = st.integers(-(2**65), 2**65)  # beyond a long too: the seed is taken as a Java long
BOUNDS = st.one_of(
    st.integers(1, 2**31 - 1),
    st.integers(2**30, 2**31 - 1),  # the rejection loop rejects up to half of all draws here
    st.integers(0, 30).map(lambda k: 2**k),
    st.integers(1, 100),
)


@FUZZ
@given(seed=SEEDS, bound=BOUNDS)
@example(seed=0, bound=2**31 - 1)
@example(seed=-1, bound=2**30 + 1)
@example(seed=2**63, bound=3 * 2**29)
def test_bounded_next_int_matches_the_transcription(seed: int, bound: int) -> None:
    ours, java = JavaRandom(seed), Reference(seed)
    assert [ours.nextInt(bound) for _ in range(12)] == [java.nextInt(bound) for _ in range(12)]


@FUZZ
@given(seed=SEEDS)
@example(seed=2**63 - 1)
@example(seed=-(2**63))
def test_unbounded_next_int_matches_the_transcription(seed: int) -> None:
    ours, java = JavaRandom(seed), Reference(seed)
    assert [ours.nextInt() for _ in range(12)] == [java.nextInt() for _ in range(12)]


@FUZZ
@given(seed=SEEDS, bits=st.integers(1, 32))
@example(seed=0, bits=1)
@example(seed=0, bits=32)
def test_next_bits_matches_the_transcription(seed: int, bits: int) -> None:
    ours, java = JavaRandom(seed), Reference(seed)
    assert [ours.next(bits) for _ in range(8)] == [java.next(bits) for _ in range(8)]


@FUZZ
@given(seed=SEEDS, size=st.integers(0, 70))
def test_shuffle_matches_the_transcription(seed: int, size: int) -> None:
    ours, java = list(range(size)), list(range(size))
    shuffle(ours, JavaRandom(seed))
    reference_shuffle(java, Reference(seed))
    assert ours == java


def test_set_seed_restarts_the_stream() -> None:
    r = JavaRandom(7)
    first = [r.nextInt() for _ in range(3)]
    r.setSeed(7)
    assert [r.nextInt() for _ in range(3)] == first


@FUZZ
@given(st.integers(-(2**70), 2**70))
@example(2**31 - 1)
@example(2**31)
@example(-(2**31))
@example(-(2**31) - 1)
@example(2**32 - 1)
@example(2**63 - 1)
@example(2**63)
@example(-(2**63))
@example(2**64 - 1)
def test_int_casts_match_java(v: int) -> None:
    assert _to_int32(v) == int32(v)
    assert _to_int64(v) == int64(v)


@pytest.mark.parametrize("bits", [0, 33, -1])
def test_next_refuses_bit_counts_outside_1_to_32(bits: int) -> None:
    with pytest.raises(ValueError, match=r"^bits must be in 1\.\.32$"):
        JavaRandom(1).next(bits)


@pytest.mark.parametrize("bound", [0, -1, 2**31, -(2**31)])
def test_next_int_refuses_bounds_outside_a_positive_java_int(bound: int) -> None:
    with pytest.raises(ValueError, match=r"^bound must be a positive Java int$"):
        JavaRandom(1).nextInt(bound)


def rejections(seed: int, bound: int, draws: int) -> int:
    """How often the reference's rejection loop asks for another draw in ``draws`` calls."""
    java, count = Reference(seed), 0
    real_next = java.next

    def counting(bits: int) -> int:
        nonlocal count
        count += 1
        return real_next(bits)

    java.next = counting  # type: ignore[method-assign]
    for _ in range(draws):
        java.nextInt(bound)
    return count - draws


def test_jvm_vectors_exercise_the_rejection_loop() -> None:
    """The committed JVM vectors pin the loop: large non-power-of-two bounds do reject draws."""
    vectors = java_vectors()["nextInt_bound"]
    large = [e for e in vectors if e["bound"] > 2**30 and e["bound"] & (e["bound"] - 1)]
    assert {e["bound"] for e in large} >= {2**30 + 1, 3 * 2**29, 1500000001, 2**31 - 2}
    rejected = sum(rejections(e["seed"], e["bound"], len(e["values"])) for e in large)
    assert rejected > 100

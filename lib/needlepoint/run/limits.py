"""The ranges a run's options must lie in, the base URL's shape and the key's characters.

Each is checked before anything is written or sent, and each refusal is one line that names the
option and the rule, never a secret: a key is described by its length and the position and kind
of the offending character, never shown.
"""

from __future__ import annotations

import ipaddress
import math
from urllib.parse import urlsplit

from needlepoint.errors import NeedlepointError

MIN_KEY_LENGTH = 8
# A day: longer than any request or pause a run needs, short enough that a clock, a sleep and a
# timestamp computed from it stay exact (1e308 seconds overflowed them).
MAX_SECONDS = 86_400.0
MIN_TIMEOUT_S = 0.001
# Money per million tokens, and a cap: with counts below 2^53 every cost stays a finite double.
MAX_RATE = 1e6
MAX_COST_CAP = 1e12
# More attempts than any plan holds (a protocol plans at most 100,000 requests).
MAX_ALLOW = 1_000_000


def number(
    name: str,
    value: float | None,
    *,
    low: float = 0.0,
    high: float,
    positive: bool = False,
) -> float | None:
    """``value`` as a float within ``[low, high]`` (``(0, high]`` when ``positive``), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise NeedlepointError(f"{name} must be a finite number")
    if value < 0 or (positive and value == 0):
        raise NeedlepointError(f"{name} must be {'positive' if positive else 'non-negative'}")
    if value < low or value > high:
        raise NeedlepointError(f"{name} {value:g} is outside the allowed range {low:g} to {high:g}")
    return float(value)


def check_allow(allow: object) -> int:
    """A positive whole number of attempts, at most MAX_ALLOW."""
    if isinstance(allow, bool) or not isinstance(allow, int) or allow <= 0:
        raise NeedlepointError("--allow must be a positive integer: the most requests to send")
    if allow > MAX_ALLOW:
        raise NeedlepointError(f"--allow {allow} is more than {MAX_ALLOW:,}, more than any plan")
    return allow


def check_key(key: str, env: str) -> None:
    """A key of printable ASCII without whitespace: anything else cannot be sent in a header.

    A key read from a file with Windows line ends carries a CR; sending it made httpx refuse
    the header after the attempt was journalled, burning the request.
    """
    if len(key) < MIN_KEY_LENGTH:
        raise NeedlepointError(
            f"the key in {env} is shorter than {MIN_KEY_LENGTH} characters, too short to be "
            "kept out of the records reliably"
        )
    for at, c in enumerate(key, start=1):
        if "!" <= c <= "~":
            continue
        if c in "\r\n":
            what = "a line break (CR or LF; read from a file with Windows line ends?)"
        elif c in " \t" or c.isspace():
            what = "whitespace"
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            what = "a control character"
        else:
            what = "a character that is not ASCII"
        raise NeedlepointError(
            f"the key in {env} holds {what} at character {at} of {len(key)}; a key is printable "
            "ASCII without spaces (the key itself is not shown)"
        )


def check_base_url(base_url: str, allow_insecure_http: bool) -> None:
    """An http(s) URL without credentials, query or fragment; plain http only to loopback."""
    try:
        parts = urlsplit(base_url)
        host, _ = parts.hostname, parts.port
    except ValueError as exc:
        raise NeedlepointError(f"--base-url is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise NeedlepointError(f"--base-url {base_url[:200]!r} is not an http(s) URL")
    if parts.username is not None or parts.password is not None:
        # Not echoed: it holds a credential. httpx would send it as Basic auth instead of the key.
        raise NeedlepointError(
            "--base-url holds a user name or password (user:pass@host); the URL is recorded in "
            "run.json, so credentials never go in it: the key goes in --api-key-env"
        )
    if parts.query or parts.fragment or base_url.rstrip().endswith(("?", "#")):
        raise NeedlepointError(
            "--base-url has a query or fragment ('?' or '#'); the endpoint path is appended to "
            "the base URL, which a query or fragment would swallow"
        )
    if parts.scheme == "http" and not is_loopback(host) and not allow_insecure_http:
        raise NeedlepointError(
            f"--base-url {base_url!r}: the key would travel unencrypted to "
            f"{host}; use https, a loopback host (127.0.0.0/8, ::1, localhost), "
            "or --allow-insecure-http"
        )


def is_loopback(host: str | None) -> bool:
    """Whether a URL's host is this machine: ``localhost``, 127.0.0.0/8 or ::1."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

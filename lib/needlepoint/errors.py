"""The one exception type that the CLI turns into a one-line message and exit status 2, and the
rule that keeps a value that looks like a key out of every message shown to a user."""

from __future__ import annotations

import re


class NeedlepointError(Exception):
    """Bad input or a refused operation: shown to the user as one line, never a traceback."""


NOT_SHOWN = "[a value that looks like a key, not shown]"
# Prefixes of common API keys and tokens (OpenAI, Anthropic and other sk-/pk- keys, GitHub,
# GitLab, Hugging Face, Slack, Google, AWS access key ids).
_KEY_PREFIX = re.compile(
    r"(sk|pk|rk)[-_]|(ghp|gho|ghu|ghs|ghr|glpat|hf)_|github_pat_|xox[abprs]-|AIza|AKIA|ASIA"
)
_TOKEN = re.compile(r"[A-Za-z0-9_\-.+=~]+")
_BEARER = re.compile(r"(?i)\bbearer\s+\S+")
_RUN = re.compile(r"[A-Za-z0-9]+")


def looks_like_secret(text: str) -> bool:
    """Whether ``text`` looks like an API key or token rather than a name, path or number.

    A known key prefix followed by at least 8 more characters, or a random-looking run of 20 or
    more letters and digits with no separator, mixing upper case, lower case and at least three
    digits. A SHA-256 in hex, a date, a path, a model name such as ``Meta-Llama-3.1-8B-Instruct``
    and an environment variable's NAME do not qualify.
    """
    value = text.strip().strip("'\"")
    if _BEARER.match(value):
        return True
    if not value or not _TOKEN.fullmatch(value):
        return False
    prefix = _KEY_PREFIX.match(value)
    if prefix and len(value) >= prefix.end() + 8:
        return True
    return any(
        len(run) >= 20
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and sum(c.isdigit() for c in run) >= 3
        for run in _RUN.findall(value)
    )


def redact_secrets(message: str) -> str:
    """``message`` with every word that looks like a key replaced by a note that it is hidden."""
    message = _BEARER.sub(NOT_SHOWN, message)
    return _TOKEN.sub(lambda m: NOT_SHOWN if looks_like_secret(m.group(0)) else m.group(0), message)


def shown(value: str) -> str:
    """A user's value as a message may quote it: ``repr(value)``, unless it looks like a key."""
    return NOT_SHOWN if looks_like_secret(value) else repr(value)

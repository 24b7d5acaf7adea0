"""Keys: checked at start (printable ASCII, no whitespace), never shown, never burning a request,
and kept out of every record in whatever encoding a server echoes them."""

from __future__ import annotations

import base64
import html
import json
import urllib.parse
from pathlib import Path

import pytest
from support.fuzz import SMALL, run_cli
from support.runner import KEY_ENV, MODEL, live, of_type, server_for

from needlepoint.design.prepared import prepare
from needlepoint.errors import NeedlepointError

# A key with a slash, so that a server's ``\/`` escaping has something to escape.
KEY = "sk-live/7d1f0c9e5b2a4c68Zq"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("keys")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


def _forms(key: str) -> dict[str, str]:
    """Every spelling of the key a server or a library could produce."""
    b64 = base64.b64encode(f"Bearer {key}".encode()).decode()
    return {
        "json_u_all": "".join(f"\\u{ord(c):04x}" for c in key),
        "json_u_first": f"\\u{ord(key[0]):04X}{key[1:]}",
        "json_slash": key.replace("/", "\\/"),
        "percent": urllib.parse.quote(key, safe=""),
        "percent_lower": "".join(f"%{ord(c):02x}" for c in key),
        "html": "".join(f"&#{ord(c)};" for c in key),
        "base64_bearer": b64,
        "base64_urlsafe": base64.urlsafe_b64encode(f"u:{key}".encode()).decode(),
        "literal": key,
    }


FORMS = _forms(KEY)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_the_scrubber_matches_every_spelling(name: str) -> None:
    from needlepoint.run.transport import Scrubber

    scrub = Scrubber(KEY)
    text = f"before {FORMS[name]} after"
    assert "[REDACTED]" in scrub(text) and b"[REDACTED]" in scrub(text.encode())
    decoded = html.unescape(urllib.parse.unquote(scrub(text)))
    assert KEY not in decoded and KEY not in decoded.replace("\\/", "/")


def _body(form: str):
    # Written by hand: the form goes into the JSON text exactly as a server would send it.
    def body(payload: dict) -> bytes:
        head = '{"model":"' + str(payload.get("model")) + '","choices":[{"finish_reason":"stop",'
        return (
            head + '"message":{"role":"assistant","content":"UNKNOWN ' + form + '"}}]}'
        ).encode()

    return body


def test_an_echoed_key_is_kept_out_of_every_file_in_every_encoding(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    run = tmp_path / "run"
    in_body = [n for n in sorted(FORMS) if n != "percent"]
    with server_for(small) as server:
        modes = [server.serve(n, _body(FORMS[n])) for n in in_body]
        modes.append(server.serve("header", _body("ok"), {"request-id": FORMS["percent"]}))
        refused = json.dumps({"error": {"message": f"invalid key {FORMS['json_slash']}"}})
        modes.append(server.serve("401", refused.encode(), {}, status=401))
        server.script(modes)
        summary = live(small, run, server, allow=len(modes) + 2)
    assert summary.stop_reason == "stop_status" and summary.attempts_total == len(modes)
    assert run_cli(["results", str(run)])[0] == 0
    assert run_cli(["analyze", str(run), "--no-figures"])[0] == 0
    code, out, err = run_cli(["audit-run", str(run)])
    assert code == 0, out + err  # redaction happened before classification: the audit agrees
    texts = [p.read_bytes().decode("utf-8", "replace") for p in run.rglob("*") if p.is_file()]
    for name, form in FORMS.items():
        for text in texts:
            assert form not in text, name
            assert KEY not in html.unescape(urllib.parse.unquote(text)).replace("\\/", "/")
    kept = [o for o in of_type(run, "outcome") if "[REDACTED]" in json.dumps(o)]
    assert len(kept) == len(modes)


@pytest.mark.parametrize(
    ("key", "said"),
    [
        (KEY + "\r\n", "a line break"),
        (KEY + "\n", "a line break"),
        ("sk-" + "é" * 10, "not ASCII"),
        ("sk-live key-123", "whitespace"),
        ("sk-live\x7fkey-123", "a control character"),
        ("sk-live\tkey-123", "whitespace"),
    ],
)
def test_a_bad_key_is_refused_at_start_without_showing_it(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, said: str
) -> None:
    monkeypatch.setenv(KEY_ENV, key)
    with server_for(small) as server:
        with pytest.raises(NeedlepointError, match=said) as refused:
            live(small, tmp_path / "run", server, allow=4)
        assert server.count == 0, "no request was burnt"
    assert key.strip() not in str(refused.value)
    assert not (tmp_path / "run").exists()
    argv = ["run", str(small), "--allow", "4", "--run-dir", str(tmp_path / "cli")]
    argv += ["--base-url", server.base_url, "--model", MODEL, "--api-key-env", KEY_ENV]
    code, out, err = run_cli(argv)
    assert code == 2 and err.count("\n") == 1 and key.strip() not in out + err


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://user:secret-pass@api.example/v1", "user name or password"),
        ("https://token@api.example/v1", "user name or password"),
        ("https://api.example/v1?x=1", "query or fragment"),
        ("https://api.example/v1#frag", "query or fragment"),
        ("https://api.example/v1?", "query or fragment"),
    ],
)
def test_a_base_url_with_credentials_query_or_fragment_is_refused(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, said: str
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    argv = ["run", str(small), "--allow", "4", "--run-dir", str(tmp_path / "run")]
    argv += ["--base-url", url, "--model", MODEL, "--api-key-env", KEY_ENV]
    code, out, err = run_cli(argv)
    assert code == 2 and said in err and err.count("\n") == 1
    assert "secret-pass" not in out + err and "token@" not in out + err
    assert not (tmp_path / "run").exists(), "nothing recorded in run.json"

"""Secrets never reach a run folder or stderr, even when a provider echoes them into model output (issue #32 §4).

The loopback provider below copies the request's credentials (Bearer key, ``X-Api-Key`` value, the Basic
token built from URL userinfo) into content, reasoning, tool-call arguments and error bodies, each placed
just before the 500-character mark, where a truncation made before redaction would keep a prefix.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

from typer.testing import CliRunner

from verifier.cli import app
from verifier.http import redaction
from verifier.testing import Reply

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"
KEY = "Zq9vX2LmP0aRt7Ke4WnB"  # the API key (env var)
HEADER_KEY = "Hk3Jd8Qw5Tz1Vb6Nm4"  # an X-Api-Key header value
PASSWORD = "Pw7Rc2Xe9Gy4Ls"  # URL userinfo password
SECRETS = [KEY, HEADER_KEY, PASSWORD, base64.b64encode(f"alice:{PASSWORD}".encode()).decode()]


def echo_credentials(body: dict, ctx) -> Reply:
    creds = " ".join(v for k, v in ctx.headers.items() if k in ("authorization", "x-api-key"))
    tools = body.get("tools") or []
    n = int(ctx.body_hash[:2], 16)
    if n % 4 == 0:  # an error body whose message would be cut at 500 characters inside the key
        return Reply.error(400, "e" * 490 + creds)
    calls = None
    if tools:
        calls = [{"name": tools[0]["function"]["name"], "arguments": {"q": "a" * 488 + creds}, "id": "call_" + creds}]
    return Reply(content="c" * 495 + creds, reasoning_content="r" * 497 + creds, tool_calls=calls)


def test_echoed_credentials_appear_nowhere(tmp_path, scripted_server, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("H1_TEST_KEY", KEY)
    srv = scripted_server(echo_credentials)
    port = srv.base_url.split(":")[2].split("/")[0]
    toml = tmp_path / "eps.toml"
    toml.write_text(
        "reference = 'keyed'\n"
        f"[endpoints.keyed]\nbase_url = '{srv.base_url}'\napi_key_env = 'H1_TEST_KEY'\n"
        f"headers = {{ 'X-Api-Key' = '{HEADER_KEY}' }}\n"
        f"[endpoints.userinfo]\nbase_url = 'http://alice:{PASSWORD}@127.0.0.1:{port}/v1'\n"
        "stream = true\n")
    suite = tmp_path / "mini.jsonl"
    suite.write_text("\n".join(CORE.read_text().splitlines()[:16]) + "\n")
    out, db = tmp_path / "run", tmp_path / "hist.sqlite"
    res = CliRunner().invoke(app, ["run", "--config", str(toml), "--suite", str(suite), "--out", str(out),
                                   "--db", str(db), "--quiet"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    recs = (out / "records.jsonl").read_text()
    assert "***" in recs and '"error_class":"client_error"' in recs.replace(" ", "")
    files = [out / n for n in ("records.jsonl", "summary.json", "manifest.json", "report.html")] + [db]
    assert all(p.is_file() for p in files)
    leaks = []
    for secret in SECRETS:
        for p in [*out.rglob("*"), db]:
            if p.is_file() and secret[:8].encode() in p.read_bytes():
                leaks.append((secret, p.name))
        for where, text in (("stderr", res.stderr), ("stdout", res.stdout), ("logs", caplog.text)):
            if secret[:8] in text:
                leaks.append((secret, where))
    assert not leaks
    manifest = (out / "manifest.json").read_text()
    assert f"http://{redaction.URL_USERINFO_MASK}@127.0.0.1:{port}/v1" in manifest


def test_redact_before_truncate_and_dangling_prefixes():
    redaction.register("Sec9Ret8Value7Long")
    text = "x" * 495 + "Sec9Ret8Value7Long"
    assert redaction.truncate(text, 500) == "x" * 495 + "***"
    assert redaction.redact_message("y" * 10 + "Sec9Ret8") == "y" * 10 + "***"  # cut before we saw it
    assert redaction.redact_tree({"a": ["Sec9Ret8Value7Long", 1], "Sec9Ret8Value7Long": None}) == {"a": ["***", 1],
                                                                                                  "***": None}
    redaction.register("ab")  # too short to be a secret: registering it must not wreck ordinary text
    assert redaction.redact("abc") == "abc"


def test_url_userinfo_and_secret_headers():
    redaction.register_url("https://bob:Hunter2Pass@api.example/v1")
    assert redaction.redact_url("https://bob:Hunter2Pass@api.example/v1") == "https://<redacted>@api.example/v1"
    assert redaction.redact("password was Hunter2Pass") == "password was ***"
    redaction.register_headers({"X-Api-Key": "XkeyValue123", "HTTP-Referer": "https://example.org"})
    assert redaction.redact("XkeyValue123 https://example.org") == "*** https://example.org"
    assert redaction.is_secret_header("X-Api-Key") and not redaction.is_secret_header("HTTP-Referer")
    logging.getLogger("h1-test").warning("leaked %s", "XkeyValue123")  # the log factory redacts at creation


def test_log_records_are_redacted(caplog):
    redaction.register("LogSecret-5566")
    logging.getLogger("h1-test").error("provider said %s", "LogSecret-5566")
    assert "LogSecret-5566" not in caplog.text and "provider said ***" in caplog.text


def test_bad_url_errors_are_one_line_without_credentials():
    from verifier.http.endpoints import EndpointConfigError, from_flags

    for url in ("http://carol:Cr3dentialPw@[::1", "ftp://carol:Cr3dentialPw@host/v1"):
        try:
            from_flags(f"ref={url}", [])
        except EndpointConfigError as e:
            msg = str(e)
        else:
            raise AssertionError(f"{url} was accepted")
        assert "\n" not in msg and "Cr3dentialPw" not in msg and "<redacted>@" in msg, msg


def test_stream_error_events_and_odd_finish_reasons_are_redacted_before_their_cut():
    """The stream parser cuts an error event's message and a non-text finish reason at 200 characters: a secret
    echoed across that mark must not leave its first characters in the record."""
    import pytest

    from verifier.http.parse import _BrokenStream, _finish_str, _StreamAccumulator

    secret = "StreamErr9Secret4Key"
    redaction.register(secret)
    acc = _StreamAccumulator()
    with pytest.raises(_BrokenStream) as caught:
        acc.feed(json.dumps({"error": {"message": "m" * 190 + secret}}), 0.0)
    assert secret[:8] not in str(caught.value) and str(caught.value).endswith("m" * 10 + "***")
    odd = _finish_str({"reason": "f" * 180 + secret})
    assert secret[:8] not in odd and "***" in odd


def test_a_url_user_name_alone_is_not_masked_in_model_output():
    """Only the password (and user:password, the Basic token) of URL userinfo are secrets: a user name such as
    'alice' must not be masked wherever a model reply mentions it."""
    redaction.register_url("https://alice:Pw-Only-9f8e7d@api.example/v1")
    assert redaction.redact("email alice@example.com") == "email alice@example.com"
    assert redaction.redact("alice:Pw-Only-9f8e7d and Pw-Only-9f8e7d") == "*** and ***"
    assert redaction.redact_url("https://alice:Pw-Only-9f8e7d@api.example/v1") == "https://<redacted>@api.example/v1"

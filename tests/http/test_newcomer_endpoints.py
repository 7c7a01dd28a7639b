"""Issue #39, a newcomer's first hour: a base URL without ``/v1``, and the key itself passed to ``--api-key-env``.

Real loopback servers: the scripted OpenAI-compatible one (serves only ``/v1/...``) and the raw-socket one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.http.raw_server import RawRequest, RawServer, completion, http_response
from verifier.cli import app
from verifier.http.client import EndpointClient, EndpointError
from verifier.http.endpoints import EndpointConfigError, check_key_env_name
from verifier.records import EndpointConfig
from verifier.run.store import RunManifest
from verifier.testing import schema_responder

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-proj-Zq9XnewcomerPASTEDkey0123456789abcdef"


def _root(v1_url: str) -> str:
    return v1_url.removesuffix("/v1")


async def test_base_without_v1_uses_v1_when_models_answers_there(scripted_server, caplog):
    srv = scripted_server(schema_responder)
    root = _root(srv.base_url)
    caplog.set_level(logging.WARNING)
    async with EndpointClient(EndpointConfig(name="local", base_url=root), backoff_base=0.001) as c:
        await c.preflight()
        ex = await c.chat({"messages": [{"role": "user", "content": "hi"}]})
    assert c.config.base_url == srv.base_url and c.config.model == "scripted-model"
    assert ex.ok
    lines = [r.getMessage() for r in caplog.records if "/v1" in r.getMessage()]
    assert lines == [f"endpoint 'local': GET /models is HTTP 404 at {root} but answers at {root}/v1; using {root}/v1 "
                     "(write /v1 in the base URL to skip this check)"]
    assert [p for _, p, _ in srv.log] == ["/v1/chat/completions"]  # nothing went to a wrong path after the switch


async def test_base_without_v1_uses_v1_when_only_chat_answers_there(caplog):
    """No ``/models`` anywhere (some gateways): the test chat request is 404 at the base and 200 under ``/v1``."""
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        if req.method == "POST" and req.path == "/v1/chat/completions":
            w.write(http_response(200, completion("pong")))
        else:
            w.write(http_response(404, b'{"error":{"message":"no route"}}', reason="Not Found"))

    caplog.set_level(logging.WARNING)
    async with RawServer(reply) as srv:
        root = _root(srv.url)
        async with EndpointClient(EndpointConfig(name="gw", base_url=root + "/", model="m"),
                                  backoff_base=0.001) as c:
            await c.preflight()
    assert c.config.base_url == root + "/v1"
    assert [(r.method, r.path) for r in srv.requests] == [
        ("GET", "/models"), ("GET", "/v1/models"), ("POST", "/chat/completions"), ("POST", "/v1/chat/completions")]
    assert any(f"POST /chat/completions is HTTP 404 at {root} but answers at {root}/v1" in r.getMessage()
               for r in caplog.records)


async def test_base_without_v1_and_a_refused_key_says_both(caplog):
    """``/v1`` exists but refuses the key (vLLM's ``--api-key`` guards ``/v1`` only): the line is about the key, at
    ``/v1``, never "model not found"."""
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        if req.path.startswith("/v1/"):
            w.write(http_response(401, b'{"error":{"message":"Unauthorized"}}', reason="Unauthorized"))
        else:
            w.write(http_response(404, b'{"detail":"Not Found"}', reason="Not Found"))

    caplog.set_level(logging.WARNING)
    async with RawServer(reply) as srv:
        root = _root(srv.url)
        async with EndpointClient(EndpointConfig(name="local", base_url=root), api_key="a-wrong-key-5678",
                                  backoff_base=0.001) as c:
            with pytest.raises(EndpointError) as err:
                await c.preflight()
    assert err.value.kind == "auth" and "HTTP 401" in str(err.value)
    assert c.config.base_url == root + "/v1"
    assert any(f"using {root}/v1" in r.getMessage() for r in caplog.records)
    assert "a-wrong-key-5678" not in str(err.value) + caplog.text


async def test_no_v1_anywhere_keeps_the_model_message_and_names_the_url():
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        w.write(http_response(404, b'{"error":{"message":"model not found"}}', reason="Not Found"))

    async with RawServer(reply) as srv:
        root = _root(srv.url)
        async with EndpointClient(EndpointConfig(name="gw", base_url=root, model="m"), backoff_base=0.001) as c:
            with pytest.raises(EndpointError) as err:
                await c.preflight()
    assert str(err.value) == f"endpoint 'gw': model 'm' not found (HTTP 404) at {root}"
    assert c.config.base_url == root  # not left on the /v1 it tried


async def test_a_base_that_ends_in_v1_is_never_given_another():
    async def reply(req: RawRequest, w: asyncio.StreamWriter) -> None:
        w.write(http_response(404, b"{}", reason="Not Found"))

    async with RawServer(reply) as srv:
        async with EndpointClient(EndpointConfig(name="gw", base_url=srv.url, model="m", max_attempts=1),
                                  backoff_base=0.001) as c:
            with pytest.raises(EndpointError):
                await c.preflight()
    assert all("/v1/v1" not in r.path for r in srv.requests) and len(srv.requests) == 2


@pytest.mark.slow
def test_run_with_a_base_url_without_v1_works_and_says_so(tmp_path, scripted_server):
    srv = scripted_server(schema_responder)
    root = _root(srv.base_url)
    suite = tmp_path / "one.jsonl"
    suite.write_text(json.dumps({"id": "c1", "messages": [{"role": "user", "content": "weather in Oslo?"}],
                                 "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
                                     "type": "object", "properties": {"city": {"type": "string"}}}}}]}) + "\n")
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "verifier.cli", "run", "--reference", root, "--endpoint", root,
                          "--suite", str(suite), "--out", str(out), "--no-history", "--quiet"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    said = [ln for ln in res.stderr.splitlines() if "/v1" in ln]
    assert len(said) == 2 and all(ln.endswith(f"using {root}/v1 (write /v1 in the base URL to skip this check)")
                                  for ln in said)  # one line per endpoint
    assert all(e.base_url == srv.base_url for e in RunManifest.load(out).endpoints)


@pytest.mark.parametrize("value", [KEY, "sk-ant-api03-abc", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
                                   "gsk_abcdEFGH1234", "Bearer sk-something-long", "abcDEF0123456789ghiJKL0123"])
def test_a_key_passed_as_the_variable_name_is_refused_without_showing_it(tmp_path, value, capfd, caplog):
    res = CliRunner().invoke(app, ["run", "--endpoint", "http://127.0.0.1:9/v1", "--api-key-env", value,
                                   "--out", str(tmp_path / "run"), "--no-history", "--quiet"],
                             catch_exceptions=False)
    text = res.output + (res.stderr or "") + "".join(capfd.readouterr()) + caplog.text
    assert res.exit_code == 2
    lines = (res.stderr or res.output).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --api-key-env: the value given ")
    assert "pass the NAME of the variable that holds the key" in lines[0]
    assert value not in text and value[4:] not in text  # neither the value nor most of it
    assert not (tmp_path / "run").exists()  # refused before a folder or a request


def test_a_key_in_the_toml_api_key_env_is_refused_naming_the_field(tmp_path):
    cfg = tmp_path / "eps.toml"
    cfg.write_text(f'[endpoints.prov]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "{KEY}"\n')
    res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--no-history", "--quiet",
                                   "--out", str(tmp_path / "run")], catch_exceptions=False)
    assert res.exit_code == 2
    line = (res.stderr or res.output).strip()
    assert line.startswith(f"error: {cfg}: endpoints.prov.api_key_env: the value given looks like an API key itself")
    assert KEY not in res.output + (res.stderr or "")


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "MY_KEY_2", "_X", "together_api_key"])
def test_ordinary_variable_names_pass(name):
    check_key_env_name(name, "--api-key-env")


def test_an_unset_ordinary_name_still_gets_the_unset_message(tmp_path, monkeypatch):
    monkeypatch.delenv("SURELY_UNSET_VAR", raising=False)
    res = CliRunner().invoke(app, ["run", "--reference", "http://127.0.0.1:9/v1", "--api-key-env", "SURELY_UNSET_VAR",
                                   "--out", str(tmp_path / "run"), "--no-history", "--quiet"], catch_exceptions=False)
    assert res.exit_code == 2
    assert "environment variable SURELY_UNSET_VAR is not set" in (res.stderr or res.output)


def test_invalid_name_error_type():
    with pytest.raises(EndpointConfigError):
        check_key_env_name("has space", "--api-key-env")


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(min_size=1, max_size=80),
                 st.builds(lambda p, t: p + t, st.sampled_from(["sk-", "sk-proj-", "AIza", "gsk_", "hf_", "xai-"]),
                           st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=60))))
def test_fuzz_the_refusal_never_contains_the_value(value):
    """Whatever is passed: accepted only as a plain variable name, and a refusal never repeats the value."""
    try:
        check_key_env_name(value, "--api-key-env")
    except EndpointConfigError as e:
        # the message is one of two fixed lines: nothing of the value is in it (a short value may be a substring)
        fixed = ("--api-key-env: the value given {} (not shown); pass the NAME of the variable that holds the key, "
                 "e.g. export OPENAI_API_KEY=... then --api-key-env OPENAI_API_KEY")
        assert str(e) in {fixed.format("looks like an API key itself"),
                          fixed.format("is not an environment variable name")}
        return
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value)
    assert not value.startswith(("sk-", "AIza", "gsk_", "hf_", "xai-"))

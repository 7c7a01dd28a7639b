"""Endpoint configuration from flags and TOML files; errors name the file and field."""

from __future__ import annotations

import pytest

from verifier.http.endpoints import (
    BUILTIN_CONCURRENCY,
    EndpointConfigError,
    check_keys,
    from_flags,
    load_config,
    parse_builtin,
)


def test_default_is_builtin_comparison():
    eps = from_flags(None, [])
    assert eps.reference == "bf16"
    assert eps.candidates == ["fp8-kv", "int4-decode", "fp8-kv+int4-decode"]
    spec = eps.builtin("fp8-kv+int4-decode")
    assert spec.kv == "fp8" and spec.decode_weights == "int4" and spec.weights == "bf16" and spec.prefix_cache
    info = {i.name: i for i in eps.info()}
    assert info["bf16"].is_reference and info["fp8-kv"].builtin["kv"] == "fp8"


def test_flags_names_model_and_key_env():
    eps = from_flags("first=https://api.example.com/v1", ["https://p1.example/v1", "p2=https://p2.example/v1?x=1",
                                                          "builtin:tiny?kv=fp8&prefix_cache=0"],
                     model="m", api_key_env="KEY")
    assert [e.name for e in eps.endpoints] == ["first", "p1.example", "p2", "tiny:kv=fp8,prefix_cache=0"]
    assert eps.reference == "first" and eps.get("p2").base_url == "https://p2.example/v1?x=1"
    assert eps.get("p1.example").model == "m" and eps.get("p1.example").api_key_env == "KEY"
    built = eps.get("tiny:kv=fp8,prefix_cache=0")
    assert built.api_key_env is None and built.model is None


def test_builtin_engines_take_more_requests_at_once_unless_told_otherwise(tmp_path):
    """A local engine batches what is in flight, so built-ins default to BUILTIN_CONCURRENCY; a remote endpoint keeps
    the usual 8, and a concurrency the user wrote is kept as written."""
    assert BUILTIN_CONCURRENCY > 8
    assert {e.concurrency for e in from_flags(None, []).endpoints} == {BUILTIN_CONCURRENCY}
    eps = from_flags("builtin:tiny", ["https://p1.example/v1"])
    assert [e.concurrency for e in eps.endpoints] == [BUILTIN_CONCURRENCY, 8]
    p = tmp_path / "eps.toml"
    p.write_text('[endpoints.a]\nbase_url = "builtin:tiny"\n[endpoints.b]\nbase_url = "builtin:tiny?kv=fp8"\n'
                 'concurrency = 3\n[endpoints.c]\nbase_url = "https://c.example/v1"\n')
    assert [e.concurrency for e in load_config(p).endpoints] == [BUILTIN_CONCURRENCY, 3, 8]


@pytest.mark.parametrize("url,msg", [
    ("ftp://x/v1", "not an http"), ("builtin:tiny?kv=int3", "kv must be"), ("builtin:tiny?foo=1",
                                                                            "unknown builtin option"),
    ("builtin:", "names no model"),
])
def test_bad_flag_urls(url, msg):
    with pytest.raises(EndpointConfigError, match=msg):
        from_flags(None, [url])


def test_parse_builtin_plain_url_is_none():
    assert parse_builtin("https://x/v1") is None


def test_toml_tables_and_reference(tmp_path):
    p = tmp_path / "eps.toml"
    p.write_text('''
reference = "first"
[endpoints.router]
base_url = "https://openrouter.ai/api/v1"
model = "moonshotai/kimi-k2"
api_key_env = "OPENROUTER_API_KEY"
extra_body = { provider = { only = ["X"] } }
rate = 2.5
concurrency = 4
stream = true
headers = { "HTTP-Referer" = "https://example.org" }

[endpoints.first]
base_url = "https://api.moonshot.ai/v1"
model = "kimi-k2"
''')
    eps = load_config(p)
    assert eps.reference == "first" and [e.name for e in eps.endpoints] == ["first", "router"]
    r = eps.get("router")
    assert r.extra_body == {"provider": {"only": ["X"]}} and r.rate == 2.5 and r.concurrency == 4 and r.stream
    assert r.headers == {"HTTP-Referer": "https://example.org"}


@pytest.mark.parametrize("text,msg", [
    ("[endpoints.a]\nmodel = 'm'\n", r"eps\.toml: endpoints\.a\.base_url is missing"),
    ("[endpoints.a]\nbase_url = 'https://x/v1'\nconcurrency = 'many'\n", r"eps\.toml: endpoints\.a\.concurrency: "),
    ("[endpoints.a]\nbase_url = 'https://x/v1'\nbogus = 1\n",
     r"eps\.toml: endpoints\.a: unknown field\(s\) \['bogus'\]"),
    ("reference = 'zz'\n[endpoints.a]\nbase_url = 'https://x/v1'\n", r"reference = 'zz' is not one of"),
    ("[endpoints.a\n", r"eps\.toml: not valid TOML"),
    ("[[endpoints]]\nbase_url = 'https://x/v1'\n", r"endpoints\[0\]\.name is missing"),
])
def test_toml_errors_name_file_and_field(tmp_path, text, msg):
    p = tmp_path / "eps.toml"
    p.write_text(text)
    with pytest.raises(EndpointConfigError, match=msg) as e:
        load_config(p)
    assert "\n" not in str(e.value)


def test_missing_key_env_is_named(monkeypatch):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    eps = from_flags("https://x/v1", [], api_key_env="NOPE_KEY")
    with pytest.raises(EndpointConfigError, match="environment variable NOPE_KEY is not set"):
        check_keys(eps)

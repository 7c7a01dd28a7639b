"""``verifier endpoints import openrouter``: from a loopback OpenRouter stand-in and from a saved file.

The listing is served by :class:`verifier.testing.openrouter_stub.OpenRouterStub` on 127.0.0.1 (real HTTP), in the
documented response shape (tests/cli/data/openrouter_endpoints.json). The written TOML must load as an endpoints
file as is, and a claims table with an unknown key must be refused in one line.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.http.endpoints import EndpointConfigError, load_config
from verifier.testing.openrouter_stub import OpenRouterStub

FIXTURE = Path(__file__).resolve().parent / "data" / "openrouter_endpoints.json"
MODEL = "verifier/tiny-chat"


def _cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, args, env=env)
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture()
def stub() -> OpenRouterStub:
    with OpenRouterStub(json.loads(FIXTURE.read_text()), {}) as s:
        yield s


def test_import_from_loopback_listing_writes_a_loadable_pinned_file(stub: OpenRouterStub, tmp_path: Path) -> None:
    out = tmp_path / "endpoints.toml"
    code, stdout, err = _cli(["endpoints", "import", "openrouter", MODEL, "--api-base", stub.api_base, "--out",
                              str(out)], env={"OPENROUTER_API_KEY": "sk-or-secret-123"})
    assert code == 0, err
    assert "4 endpoint(s), reference 'verifier'" in stdout and "mystery: pinned to mystery" in stdout
    text = out.read_text()
    assert "sk-or-secret-123" not in text and 'api_key_env = "OPENROUTER_API_KEY"' in text
    data = tomllib.loads(text)
    assert data["reference"] == "verifier"
    assert data["endpoints"]["verifier"]["price"] == {"input": 0.6, "output": 2.5, "cached_input": 0.15}
    assert data["endpoints"]["cheaphost-bf16"]["extra_body"] == {
        "provider": {"only": ["cheaphost/bf16"], "allow_fallbacks": False}}
    assert "quantization" not in data["endpoints"]["mystery"]["claims"]
    assert "price" not in data["endpoints"]["mystery"] and "# Mystery: no quantization label" in text
    eps = load_config(out)
    assert eps.reference == "verifier" and eps.candidates == ["cheaphost-bf16", "honestquant-int4", "mystery"]
    cfg = eps.get("honestquant-int4")
    assert cfg.base_url == f"{stub.api_base}/api/v1" and cfg.claims is not None and cfg.claims.quantization == "int4"
    assert cfg.price is not None and cfg.price.output == pytest.approx(1.2)


def test_import_from_saved_file_is_the_same_without_network(stub: OpenRouterStub, tmp_path: Path) -> None:
    fetched, saved = tmp_path / "a.toml", tmp_path / "b.toml"
    code, _, err = _cli(["endpoints", "import", "openrouter", MODEL, "--api-base", stub.api_base,
                         "--out", str(fetched)])
    assert code == 0, err
    code, _, err = _cli(["endpoints", "import", "openrouter", MODEL, "--from", str(FIXTURE), "--api-base",
                         stub.api_base, "--out", str(saved), "--reference", "CheapHost"])
    assert code == 0, err
    a, b = tomllib.loads(fetched.read_text()), tomllib.loads(saved.read_text())
    assert b["reference"] == "cheaphost-bf16" and a["endpoints"] == b["endpoints"]


def test_bad_input_is_one_line(stub: OpenRouterStub, tmp_path: Path) -> None:
    out = tmp_path / "e.toml"
    cases = [
        (["endpoints", "import", "together", MODEL, "--out", str(out)], "unknown source 'together'"),
        (["endpoints", "import", "openrouter", "no-slash", "--api-base", stub.api_base, "--out", str(out)],
         "expected AUTHOR/SLUG"),
        (["endpoints", "import", "openrouter", "other/model", "--api-base", stub.api_base, "--out", str(out)],
         "HTTP 404"),
        (["endpoints", "import", "openrouter", MODEL, "--from", str(tmp_path / "none.json"), "--out", str(out)],
         "cannot read"),
        (["endpoints", "import", "openrouter", MODEL, "--from", str(FIXTURE), "--reference", "x", "--out", str(out)],
         "--reference x: no such provider"),
        (["endpoints", "import", "openrouter", MODEL, "--api-base", "http://127.0.0.1:9", "--out", str(out)],
         "GET http://127.0.0.1:9/api/v1/models/verifier/tiny-chat/endpoints: ConnectError"),
    ]
    for args, expected in cases:
        code, _, err = _cli(args)
        assert code == 2 and err.count("\n") == 1 and expected in err, (args, err)
        assert not out.exists()
    out.write_text("keep me")
    code, _, err = _cli(["endpoints", "import", "openrouter", MODEL, "--from", str(FIXTURE), "--out", str(out)])
    assert code == 2 and "already exists" in err and out.read_text() == "keep me"


def test_unknown_claims_key_is_refused_naming_file_endpoint_and_key(tmp_path: Path) -> None:
    toml = tmp_path / "e.toml"
    toml.write_text('[endpoints.a]\nbase_url = "http://127.0.0.1:9/v1"\nclaims = { quantisation = "fp8" }\n')
    with pytest.raises(EndpointConfigError) as e:
        load_config(toml)
    assert str(e.value) == (f"{toml}: endpoints.a.claims: unknown key 'quantisation' (known: quantization, kv_cache, "
                            "decode_weights, context_length, supported_parameters, implicit_caching)")
    toml.write_text('[endpoints.a]\nbase_url = "http://127.0.0.1:9/v1"\nclaims = { context_length = "long" }\n')
    with pytest.raises(EndpointConfigError, match=r"endpoints\.a\.claims\.context_length: "):
        load_config(toml)
    toml.write_text('[endpoints.a]\nbase_url = "http://127.0.0.1:9/v1"\nclaims = "fp8"\n')
    with pytest.raises(EndpointConfigError, match=r"endpoints\.a\.claims must be a table"):
        load_config(toml)
    code, _, err = _cli(["run", "--config", str(toml), "--out", str(tmp_path / "r"), "--no-history"])
    assert code == 2 and err.count("\n") == 1 and "claims must be a table" in err

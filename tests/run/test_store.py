"""RecordStore on real files: append/read, resume keys, torn last line, duplicates, corrupt lines named."""

from __future__ import annotations

import threading

import pytest

from verifier.records import ExchangeRecord
from verifier.run.store import RecordStore, RunManifest, StoreError


def rec(case: str, endpoint: str = "a", repeat: int = 0, suite: str = "s", kind: str = "toolcall",
        **kw) -> ExchangeRecord:
    return ExchangeRecord(request_hash="h", kind=kind, suite=suite, case_id=case, endpoint=endpoint, repeat=repeat,
                          status=200, **kw)


def test_append_read_filter_and_keys(tmp_path):
    path = tmp_path / "records.jsonl"
    with RecordStore(path) as st:
        st.append(rec("c1"))
        st.append(rec("c1", endpoint="b"))
        st.append(rec("c2", suite="other", kind="agent_step", step=3))
    st2 = RecordStore(path)
    assert st2.done_keys() == {("s", "c1", "a", 0, None, None), ("s", "c1", "b", 0, None, None),
                               ("other", "c2", "a", 0, 3, None)}
    assert [r.case_id for r in st2.read(suite="s")] == ["c1", "c1"]
    assert [r.step for r in st2.read(kind="agent_step")] == [3]
    assert len(st2.read()) == 3
    st2.close()


def test_duplicate_keys_are_dropped(tmp_path):
    with RecordStore(tmp_path / "r.jsonl") as st:
        st.append(rec("c1"))
        st.append(rec("c1"))
        assert st.duplicates_dropped == 1
    assert len(RecordStore(tmp_path / "r.jsonl").read()) == 1


def test_torn_last_line_is_trimmed_on_open(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordStore(path) as st:
        st.append(rec("c1"))
        st.append(rec("c2"))
    whole = path.read_bytes()
    path.write_bytes(whole + rec("c3").model_dump_json().encode()[:40])  # a kill mid-write
    st = RecordStore(path)
    assert len(st) == 2 and [r.case_id for r in st.read()] == ["c1", "c2"]  # readers skip the torn tail
    st.append(rec("c3"))
    assert st.torn_bytes_trimmed == 40
    st.close()
    assert [r.case_id for r in RecordStore(path).read()] == ["c1", "c2", "c3"]


def test_corrupt_middle_line_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(rec("c1").model_dump_json() + "\n{garbage\n" + rec("c2").model_dump_json() + "\n")
    with pytest.raises(StoreError, match=r"r\.jsonl:2"):
        RecordStore(path)


def test_concurrent_appends_from_threads(tmp_path):
    st = RecordStore(tmp_path / "r.jsonl")

    def work(t: int) -> None:
        for i in range(200):
            st.append(rec(f"c{i}", endpoint=f"t{t}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st.close()
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(lines) == 800 and len(RecordStore(tmp_path / "r.jsonl").done_keys()) == 800


def test_manifest_missing_is_clear(tmp_path):
    with pytest.raises(StoreError, match="no manifest.json"):
        RunManifest.load(tmp_path)


def test_read_filters_unusual_suite_names(tmp_path):
    with RecordStore(tmp_path / "r.jsonl") as st:
        for name in ('ünïcode-suite', 'quote"d', "back\\slash", "plain"):
            st.append(rec("c1", suite=name))
        assert [r.suite for r in st.read(suite="ünïcode-suite")] == ["ünïcode-suite"]
        assert [r.suite for r in st.read(suite='quote"d', kind="toolcall")] == ['quote"d']
        assert [r.suite for r in st.read(suite="back\\slash")] == ["back\\slash"]
        assert st.read(suite="plain", kind="agent_step") == []


def test_read_keeps_the_first_line_of_each_key_and_counts_the_rest(tmp_path):
    """A file that already holds a key twice (an older version, or two writers before the folder lock) is read
    with each key once, the first line winning, and the ignored lines counted per (suite, endpoint)."""
    path = tmp_path / "r.jsonl"
    first = [rec("c1"), rec("c2"), rec("c1", endpoint="b"), rec("c3", suite="t", kind="agent_step", step=0)]
    def failed(r: ExchangeRecord, status: int) -> ExchangeRecord:
        return r.model_copy(update={"status": status, "error_class": "server_error"})

    later = [failed(rec("c1"), 500), rec("c2", repeat=1),  # repeat 1 is a new key: kept
             failed(rec("c1"), 503), failed(rec("c3", suite="t", kind="agent_step", step=0), 500)]
    path.write_text("".join(r.model_dump_json() + "\n" for r in first + later))
    st = RecordStore(path)
    got = st.read()
    assert [(r.suite, r.case_id, r.endpoint, r.repeat, r.status) for r in got] == [
        ("s", "c1", "a", 0, 200), ("s", "c2", "a", 0, 200), ("s", "c1", "b", 0, 200), ("t", "c3", "a", 0, 200),
        ("s", "c2", "a", 1, 200)]
    assert st.duplicates_on_read() == {("s", "a"): 2, ("t", "a"): 1}
    assert len(st) == 5  # the resume key set agrees: five distinct exchanges
    fresh = RecordStore(path)
    assert [r.status for r in fresh.read(suite="s")] == [200, 200, 200, 200]
    assert fresh.duplicates_on_read() == {("s", "a"): 2}  # counts cover what was read so far
    assert RecordStore(tmp_path / "clean.jsonl").duplicates_on_read() == {}


def test_read_filter_does_not_skip_lines_written_with_other_spacing(tmp_path):
    """The fast pre-filter looks for the compact ``"suite":"s"``; a valid line spaced differently is parsed, not
    lost."""
    import json

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(json.loads(rec("c1").model_dump_json()), indent=None) + "\n"
                    + rec("c2").model_dump_json() + "\n" + rec("c3", suite="other").model_dump_json() + "\n")
    assert ", " in path.read_text().splitlines()[0]
    assert [r.case_id for r in RecordStore(path).read(suite="s", kind="toolcall")] == ["c1", "c2"]


def test_a_read_only_store_reads_each_line_once_and_refuses_appends(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(rec("c1").model_dump_json() + "\n{garbage\n" + rec("c2").model_dump_json() + "\n")
    reader = RecordStore(path, read_only=True)  # no key scan at open: the corrupt line is found by read()
    with pytest.raises(StoreError, match=r"r\.jsonl:2"):
        reader.read()
    path.write_text(rec("c1").model_dump_json() + "\n" + rec("c2").model_dump_json() + "\n")
    reader = RecordStore(path, read_only=True)
    assert [r.case_id for r in reader.read()] == ["c1", "c2"] and len(reader) == 2
    with pytest.raises(StoreError, match="opened read-only"):
        reader.append(rec("c3"))
    assert path.read_text().count("\n") == 2

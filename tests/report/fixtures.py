"""A realistic run folder for report/gate tests, built from simulated per-case outcomes.

Every figure is computed by ``verifier.stats.intervals`` from simulated case-level outcomes (seeded), so intervals and
n are consistent with each other as in a real run. Used where a real ``verifier run`` would cover only some
suite kinds; the browser test prefers a real run against the scripted server (see test_browser.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from verifier.records import ExchangeRecord, Interval, SuiteManifest
from verifier.run.summary import (
    Comparison,
    Disagreement,
    EndpointInfo,
    EndpointSuiteResult,
    RunSummary,
    Series,
)
from verifier.stats import intervals as stats

HOSTILE_REPLY = '<script>window.__pwned = 1; document.title = "pwned"</script><img src=x onerror="window.__pwned=2">'
HOSTILE_REQUEST = '{"messages": [{"role": "user", "content": "</pre><script>window.__pwned=3</script>"}]}'


def _rate(flags: np.ndarray) -> Interval:
    return stats.rate([bool(x) for x in flags])


def make_summary(
    *,
    run_id: str = "2026-01-05T02-00-00Z",
    started_at: str = "2026-01-05T02:00:00Z",
    seed: int = 0,
    schema_p: dict[str, float] | None = None,
    n: int = 120,
) -> tuple[RunSummary, list[ExchangeRecord]]:
    """A three-endpoint run (reference, fp8 KV, int4 decode) over toolcall, agent and logprob suites."""
    rng = np.random.default_rng(seed)
    schema_p = schema_p or {"ref": 0.99, "fp8-kv": 0.97, "int4-decode": 0.90}
    eps = [
        EndpointInfo(name="ref", base_url="builtin:tiny", model="verifier-tiny", is_reference=True,
                     builtin={"kv": "bf16", "weights": "bf16"}),
        EndpointInfo(name="fp8-kv", base_url="http://127.0.0.1:9/v1?api_key=SECRET123", model="verifier-tiny",
                     api_key_env="PROVIDER_KEY"),
        EndpointInfo(name="int4-decode", base_url="builtin:tiny?decode_weights=int4", model="verifier-tiny",
                     builtin={"decode_weights": "int4"}),
    ]
    suites = [
        SuiteManifest(name="toolcall-core", version="1", kind="toolcall", case_count=n, content_hash="a" * 64),
        SuiteManifest(name="agent-files", version="1", kind="agent", case_count=12, content_hash="b" * 64),
        SuiteManifest(name="logprob-core", version="1", kind="logprob", case_count=40, content_hash="c" * 64),
    ]
    results: list[EndpointSuiteResult] = []
    records: list[ExchangeRecord] = []
    ref_trig = rng.random(n) < 0.6
    ref_schema = rng.random(n) < schema_p["ref"]
    for e in eps:
        is_ref = e.name == "ref"
        trig = ref_trig.copy() if is_ref else np.where(rng.random(n) < 0.93, ref_trig, ~ref_trig)
        schema = ref_schema if is_ref else rng.random(n) < schema_p[e.name]
        tp = int(np.sum(trig & ref_trig))
        prec = stats.wilson(tp, int(trig.sum()))
        rec = stats.wilson(tp, int(ref_trig.sum()))
        f1 = 2 * prec.value * rec.value / (prec.value + rec.value)
        lat = rng.lognormal(mean=-1.2 if is_ref else -1.0, sigma=0.4, size=n)
        pct = stats.percentiles(list(lat), (50, 95))
        metrics = {
            "trigger_precision": prec,
            "trigger_recall": rec,
            "trigger_f1": Interval(value=f1, low=max(0.0, f1 - 0.06), high=min(1.0, f1 + 0.05), n=n,
                                   method="bootstrap"),
            "schema_accuracy": _rate(schema),
            "latency_p50_s": Interval(value=pct["p50"], n=n, method="percentile"),
            "latency_p95_s": Interval(value=pct["p95"], n=n, method="percentile"),
            "error_rate": stats.wilson(0, n),
        }
        comps = {}
        dis = []
        if not is_ref:
            comps["schema_accuracy"] = Comparison(
                metric="schema_accuracy", difference=stats.newcombe_paired_diff(list(ref_schema), list(schema)),
                p_value=stats.mcnemar(list(ref_schema), list(schema)), test="mcnemar")
            bad = np.flatnonzero(ref_schema & ~schema)[:5]
            for i in bad:
                dis.append(Disagreement(case_id=f"tc-{i:04d}", kind="schema", reference='get_weather({"city": "Oslo"})',
                                        candidate=HOSTILE_REPLY, request_excerpt=HOSTILE_REQUEST,
                                        detail="'city' is a required property"))
        results.append(EndpointSuiteResult(endpoint=e.name, suite="toolcall-core", kind="toolcall", is_reference=is_ref,
                                           metrics=metrics, comparisons=comps, disagreements=dis,
                                           counts={"cases": n, "retries": int(rng.integers(0, 4))}))
        for i in range(n):
            records.append(ExchangeRecord(kind="toolcall", suite="toolcall-core", case_id=f"tc-{i:04d}",
                                          endpoint=e.name,
                                          request_hash=f"{i:08x}", status=200, latency_s=float(lat[i])))
        # agent: survival and validity by step
        succ = rng.random(36) < (0.7 if is_ref else 0.55)
        steps = np.arange(0, 40, 4, dtype=float)
        surv = np.exp(-steps / (60 if is_ref else 35))
        valid = [stats.wilson(int(k), 60) for k in rng.binomial(60, 0.97 if is_ref else 0.93, size=len(steps))]
        results.append(EndpointSuiteResult(
            endpoint=e.name, suite="agent-files", kind="agent", is_reference=is_ref,
            metrics={"task_success": _rate(succ), "pass^1": _rate(succ),
                     "pass^3": stats.wilson(int(succ[:12].sum() // 2), 12),
                     "step_validity": stats.wilson(int(sum(v.value * 60 for v in valid)), 60 * len(steps))},
            series=[
                Series(name="survival_first_invalid_step", x=list(steps), y=list(surv), low=list(surv * 0.9),
                       high=list(np.minimum(1, surv * 1.1)), x_label="step", y_label="share of trials still valid"),
                Series(name="step_validity_by_step", x=list(steps), y=[v.value for v in valid],
                       low=[v.low for v in valid], high=[v.high for v in valid], x_label="step", y_label="valid share"),
            ],
            disagreements=[] if is_ref else [Disagreement(case_id="files-s3", kind="trajectory",
                                                          reference="read_file(a.txt)",
                                                          candidate="<b>bold</b> & write_file(b.txt)",
                                                          detail="step 7")],
        ))
        # logprob: KL (not for the reference against itself beyond zero)
        kl = np.abs(rng.normal(0.0, 0.01 if e.name == "fp8-kv" else 0.04, size=400)) if not is_ref else np.zeros(400)
        xs = np.sort(kl)
        results.append(EndpointSuiteResult(
            endpoint=e.name, suite="logprob-core", kind="logprob", is_reference=is_ref,
            metrics={"kl_mean": stats.bootstrap_mean(list(kl), n_boot=300),
                     "same_top": stats.wilson(int(400 - 400 * kl.mean()), 400)},
            series=[Series(name="KL CDF (forced)", x=list(xs[::20]), y=list(np.arange(1, 401)[::20] / 400),
                           x_label="KL (nats)", y_label="share of tokens at or below")],
            # the shape verifier.kinds.logprob.scoring leaves here (a Fingerprint model dump)
            extra={"fingerprint": {"verdict": "fp8-kv", "distance": 0.012, "ranking": [["fp8-kv", 0.012]],
                                   "threshold": 0.5, "reason": None}} if e.name == "fp8-kv" else {},
        ))
    summary = RunSummary(run_id=run_id, started_at=started_at, finished_at=started_at, verifier_version="0.1.0",
                         reference="ref", endpoints=eps, suites=suites, results=results,
                         settings={"seed": seed, "repeats": 1})
    return summary, records


def write_run(run_dir: Path, summary: RunSummary, records: list[ExchangeRecord] | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(summary.model_dump_json(indent=2), encoding="utf-8")
    if records:
        with open(run_dir / "records.jsonl", "w", encoding="utf-8") as fh:
            for r in records:
                fh.write(r.model_dump_json() + "\n")
    return run_dir


def run_after_nights(root: Path, nights: int) -> tuple[Path, Path]:
    """Tonight's run folder and a history database holding ``nights`` earlier runs of the same endpoints:
    (run folder, database path)."""
    from verifier.history import index_summary

    db = root / "h.sqlite"
    for night in range(nights):
        s, _ = make_summary(run_id=f"n{night}", started_at=f"2026-01-0{night + 1}T02:00:00Z", seed=night)
        index_summary(s, db)
    summary, records = make_summary(run_id="tonight", started_at="2026-01-09T02:00:00Z", seed=9)
    return write_run(root / "run", summary, records), db


def summary_json(summary: RunSummary) -> dict:
    return json.loads(summary.model_dump_json())


def history_summary(i: int, rng: np.random.Generator, *, shift_at: int | None = None) -> RunSummary:
    """Night ``i`` of a generated history: headline metrics of three endpoints, computed by ``verifier.stats.intervals``
    from simulated case outcomes. From night ``shift_at`` on, int4-decode's schema accuracy drops 0.97 -> 0.80."""
    n = 200
    started = (datetime(2025, 1, 1, 2, tzinfo=UTC) + timedelta(days=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
    eps = [EndpointInfo(name="ref", base_url="builtin:tiny", is_reference=True),
           EndpointInfo(name="fp8-kv", base_url="builtin:tiny?kv=fp8"),
           EndpointInfo(name="int4-decode", base_url="builtin:tiny?decode_weights=int4")]
    suites = [SuiteManifest(name="toolcall-core", version="1", kind="toolcall", case_count=n, content_hash="a" * 64),
              SuiteManifest(name="logprob-core", version="1", kind="logprob", case_count=40, content_hash="c" * 64)]
    ref_schema = rng.random(n) < 0.97
    results = []
    for e in eps:
        p = 0.80 if e.name == "int4-decode" and shift_at is not None and i >= shift_at else 0.97
        schema = ref_schema if e.is_reference else rng.random(n) < p
        tc = EndpointSuiteResult(endpoint=e.name, suite="toolcall-core", kind="toolcall", is_reference=e.is_reference,
                                 metrics={"schema_accuracy": _rate(schema)})
        lp = EndpointSuiteResult(endpoint=e.name, suite="logprob-core", kind="logprob", is_reference=e.is_reference)
        if not e.is_reference:
            agree = rng.random(n) < 0.985
            tc.metrics["trigger_f1"] = Interval(value=float(agree.mean()), low=float(agree.mean()) - 0.02,
                                                high=min(1.0, float(agree.mean()) + 0.01), n=n, method="bootstrap")
            tc.comparisons["schema_accuracy"] = Comparison(
                metric="schema_accuracy", difference=stats.newcombe_paired_diff(list(ref_schema), list(schema)),
                p_value=stats.mcnemar(list(ref_schema), list(schema)), test="mcnemar")
            kl = np.abs(rng.normal(0.0, 0.003 if e.name == "fp8-kv" else 0.03, size=200))
            lp.metrics["kl_mean"] = stats.bootstrap_mean(list(kl), n_boot=100)
            lp.extra["fingerprint"] = {"verdict": e.name, "distance": 0.05,
                                       "ranking": [[e.name, 0.05], ["bf16", 3.0]], "indistinguishable_from": []}
        results += [tc, lp]
    return RunSummary(run_id=f"night-{i:04d}", started_at=started, finished_at=started, verifier_version="0.1.0",
                      reference="ref", endpoints=eps, suites=suites, results=results,
                      fingerprints={r.endpoint: r.extra["fingerprint"] for r in results if "fingerprint" in r.extra})


def build_history(root: Path, runs: int, *, shift_at: int | None = None, folders: int = 3) -> Path:
    """A history database of ``runs`` generated nights; the last ``folders`` runs also get a run folder with a
    real report (so the dashboard can link them and read their verdicts). Returns the database path."""
    from reports.render import render_report
    from verifier.history import index_summary

    db = root / "history.sqlite"
    rng = np.random.default_rng(7)
    for i in range(runs):
        s = history_summary(i, rng, shift_at=shift_at)
        run_dir = None
        if i >= runs - folders:
            run_dir = write_run(root / "runs" / s.run_id, s)
            render_report(run_dir)
        index_summary(s, db, run_dir=run_dir)
    return db


def tiny_history(root: Path, runs: int = 4) -> tuple[Path, list[RunSummary]]:
    """A history whose figures span 1e-13 to 1: night ``i``'s fp8-kv mean KL is 6.665e-13 (an identical twin's KL,
    float dust) with an interval down to 3.9e-16. Returns the database and the summaries indexed into it, so a
    test can compare what a page shows with what the summaries hold."""
    from verifier.history import index_summary

    root.mkdir(parents=True, exist_ok=True)
    db = root / "tiny.sqlite"
    rng = np.random.default_rng(3)
    summaries = []
    for i in range(runs):
        s = history_summary(i, rng)
        for r in s.results:
            if r.endpoint == "fp8-kv" and "kl_mean" in r.metrics:
                r.metrics["kl_mean"] = Interval(value=6.665e-13 * (1 + i), low=3.9e-16, high=1.3e-12 * (1 + i), n=200,
                                                method="bootstrap")
        index_summary(s, db)
        summaries.append(s)
    return db, summaries

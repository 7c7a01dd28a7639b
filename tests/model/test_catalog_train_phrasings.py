"""The catalogue's training phrasings: many per tool, all usable, and none leaking into evaluation.

Why: the small model trained on ``training/train_phrasings.json`` text must generalise to the evaluation phrasings,
so it gets many varied training phrasings, but none may equal (or nearly equal) an evaluation phrasing,
or the evaluation would measure memorisation instead of generalisation.
"""

from __future__ import annotations

import random
import re
import string

import pytest

from suites.toolcall import catalog
from training.phrasings import TRAIN_PHRASINGS

EVAL, TRAIN = catalog.EVAL_PHRASINGS, TRAIN_PHRASINGS

MIN_TRAIN_TEMPLATES = 9
MIN_TRAIN_CLAUSES = 3
JACCARD_LIMIT = 0.6
#: the bare wrapper is deliberately shared: a request without any greeting or sign-off
SHARED_WRAPPERS = {"{t}"}


def words(text: str) -> list[str]:
    """Lowercased words without punctuation; a ``{slot}`` counts as one word of its own."""
    out: list[str] = []
    for part in re.split(r"(\{\w+\})", text.lower()):
        if re.fullmatch(r"\{\w+\}", part):
            out.append(part)
        else:
            out += re.findall(r"[a-z0-9]+", part.replace("'", "").replace("\u2019", ""))
    return out


def jaccard(a: str, b: str) -> float:
    sa, sb = set(words(a)), set(words(b))
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def one_substitution(a: str, b: str) -> bool:
    """True when the two differ only by swapping one word for another (in place, or as word sets)."""
    wa, wb = words(a), words(b)
    if len(wa) == len(wb) and sum(x != y for x, y in zip(wa, wb)) == 1:
        return True
    sa, sb = set(wa), set(wb)
    return len(sa - sb) == 1 and len(sb - sa) == 1


def near_duplicate(a: str, b: str) -> bool:
    return words(a) == words(b) or jaccard(a, b) >= JACCARD_LIMIT or one_substitution(a, b)


def norm(text: str) -> str:
    return " ".join(words(text))


def slots(template: str) -> set[str]:
    return {f[1] for f in string.Formatter().parse(template) if f[1]}


TOOL_IDS = [t.name for t in catalog.TOOLS]


def eval_templates(spec: catalog.ToolSpec) -> tuple[str, ...]:
    return EVAL.tools[spec.name].templates


def train_templates(spec: catalog.ToolSpec) -> tuple[str, ...]:
    return TRAIN.tools[spec.name].templates


def clause_pairs(spec: catalog.ToolSpec) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """optional argument -> (its eval clauses, its train clauses)"""
    ev, tr = EVAL.tools[spec.name].clauses, TRAIN.tools[spec.name].clauses
    return {arg: (ev.get(arg, ()), tr.get(arg, ())) for arg in {**ev, **tr}}


@pytest.mark.parametrize("spec", catalog.TOOLS, ids=TOOL_IDS)
def test_eval_and_train_word_the_same_optional_arguments(spec: catalog.ToolSpec) -> None:
    assert list(EVAL.tools[spec.name].clauses) == list(TRAIN.tools[spec.name].clauses)
    assert all(ev and tr for ev, tr in clause_pairs(spec).values())


# --------------------------------------------------------------------------- the similarity measure itself


def test_near_duplicate_measure_flags_close_pairs_and_passes_distinct_ones() -> None:
    assert words("What's {city}'s weather-like, now?") == ["whats", "{city}", "s", "weather", "like", "now"]
    assert jaccard("Convert {amount} {c} to {d}", "Exchange {amount} {c} to {d}") == pytest.approx(4 / 6)
    assert near_duplicate("Exchange {amount} {c} to {d}", "Convert {amount} {c} to {d}")  # Jaccard 0.67
    assert near_duplicate("Check {symbol}", "Quote {symbol}")  # one word swapped in place
    assert near_duplicate("{team} game results", "Latest {team} results")  # one word swapped, reordered
    assert near_duplicate("Find emails about {query}!", "find emails about {query}")  # only case/punctuation
    assert not near_duplicate("Can you play {query} for me?", "Play {query}")
    assert not near_duplicate("Music please: {query}", "Put on {query}")
    assert jaccard("Start playing {query}", "Play {query}") == pytest.approx(1 / 4)


# --------------------------------------------------------------------------- (a) how many


@pytest.mark.parametrize("spec", catalog.TOOLS, ids=TOOL_IDS)
def test_every_tool_has_many_distinct_train_templates_and_clause_variants(spec: catalog.ToolSpec) -> None:
    assert len(train_templates(spec)) >= MIN_TRAIN_TEMPLATES
    assert len(set(train_templates(spec))) == len(train_templates(spec))
    for arg, (_ev, tr) in clause_pairs(spec).items():
        assert len(tr) >= MIN_TRAIN_CLAUSES, arg
        assert len(set(tr)) == len(tr), arg


def test_train_wrappers_are_varied() -> None:
    assert len(set(TRAIN.wrappers) - SHARED_WRAPPERS) >= 10
    for w in TRAIN.wrappers:
        assert slots(w) == {"t"}, w


# --------------------------------------------------------------------------- (b) every phrasing is usable


@pytest.mark.parametrize("spec", catalog.TOOLS, ids=TOOL_IDS)
def test_every_train_template_and_clause_formats_with_sampled_arguments(spec: catalog.ToolSpec) -> None:
    required = slots(eval_templates(spec)[0])
    for t in eval_templates(spec) + train_templates(spec):
        assert slots(t) == required, (t, required)  # all templates take the same arguments
    for arg, (_ev, tr) in clause_pairs(spec).items():
        for c in tr:
            assert slots(c) <= {arg}, (arg, c)
    for seed in range(60):
        rng = random.Random(seed)
        args = spec.sample(rng)
        text = spec.phrase(args, rng, TRAIN)
        assert "{" not in text and "}" not in text, text
        values = {k: spec._text(k, v) for k, v in args.items()}
        for t in train_templates(spec):  # each template, not only the ones ``phrase`` happened to pick
            out = t.format(**values)
            assert "{" not in out and "}" not in out, (t, out)
        for arg, (_ev, tr) in clause_pairs(spec).items():
            if arg in args:
                for c in tr:
                    assert "{" not in c.format(**values), c


def test_train_wrappers_format() -> None:
    for w in TRAIN.wrappers:
        assert w.format(t="Do it.") and "{" not in w.format(t="Do it.")


# --------------------------------------------------------------------------- (c) no leakage into evaluation


ALL_EVAL_TEMPLATES = {t for s in catalog.TOOLS for t in eval_templates(s)}
ALL_EVAL_CLAUSES = {norm(c) for s in catalog.TOOLS for ev, _ in clause_pairs(s).values() for c in ev}


@pytest.mark.parametrize("spec", catalog.TOOLS, ids=TOOL_IDS)
def test_no_train_template_equals_or_nearly_equals_an_eval_template(spec: catalog.ToolSpec) -> None:
    eval_norm = {norm(t) for t in ALL_EVAL_TEMPLATES}
    for t in train_templates(spec):
        assert t not in ALL_EVAL_TEMPLATES, t
        assert norm(t) not in eval_norm, t
        for e in eval_templates(spec):
            assert not near_duplicate(t, e), (t, e, round(jaccard(t, e), 2))


@pytest.mark.parametrize("spec", catalog.TOOLS, ids=TOOL_IDS)
def test_no_train_clause_equals_an_eval_clause(spec: catalog.ToolSpec) -> None:
    for arg, (ev, tr) in clause_pairs(spec).items():
        for c in tr:
            assert c not in ev, (arg, c)
            assert norm(c) not in ALL_EVAL_CLAUSES, (arg, c)  # not even up to case/punctuation, in any tool


def test_no_train_wrapper_equals_an_eval_wrapper() -> None:
    eval_wrappers = set(EVAL.wrappers) - SHARED_WRAPPERS
    for w in set(TRAIN.wrappers) - SHARED_WRAPPERS:
        assert w not in eval_wrappers, w
        assert norm(w) not in {norm(e) for e in eval_wrappers}, w


# --------------------------------------------------------------------------- (d) the sets stay disjoint


def test_train_and_eval_string_sets_are_disjoint() -> None:
    train_t = {t for s in catalog.TOOLS for t in train_templates(s)}
    assert not train_t & ALL_EVAL_TEMPLATES
    for s in catalog.TOOLS:
        for arg, (ev, tr) in clause_pairs(s).items():
            assert not set(ev) & set(tr), (s.name, arg)
    train_c = {c for s in catalog.TOOLS for _, tr in clause_pairs(s).values() for c in tr}
    eval_c = {c for s in catalog.TOOLS for ev, _ in clause_pairs(s).values() for c in ev}
    assert not train_c & eval_c
    assert set(TRAIN.wrappers) & set(EVAL.wrappers) == SHARED_WRAPPERS
    for table in ("no_tool_requests", "system_prompts", "acks"):
        assert not set(getattr(TRAIN, table)) & set(getattr(EVAL, table)), table

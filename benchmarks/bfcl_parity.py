"""Does an imported BFCL suite score replies as BFCL's own AST checker does?

    pip download bfcl-eval --no-deps -d /tmp/bfcl && unzip -q /tmp/bfcl/*.whl -d /tmp/bfcl/pkg
    python benchmarks/bfcl_parity.py /tmp/bfcl/pkg

BFCL's data and checker are not part of this project; this script takes an unpacked ``bfcl_eval``
package (its wheel ships ``bfcl_eval/data``), imports the 20 v4 question files with ``verifier suites
import bfcl`` into a temporary folder and, for every single-call case with an expected answer, builds
replies: the canonical answer, each other acceptable value BFCL lists, each parameter left out, each
parameter changed, and (Java/JavaScript) other spellings of the same source text. Every reply that fits
the converted schema is judged twice, by :func:`verifier.kinds.toolcall.bfcl.options.args_match_options` and by
BFCL's ``ast_checker`` (imported from the given package, used as an oracle, never copied), and the
agreement is printed with its denominator, plus how many canonical answers BFCL's checker accepts.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from jsonschema.validators import validator_for

from verifier.kinds.toolcall.bfcl.answers import resolve
from verifier.kinds.toolcall.bfcl.options import args_match_options

SINGLE_CALL = ("simple_python", "simple_java", "simple_javascript", "multiple", "live_simple", "live_multiple")


def _load_bfcl_checker(package_root: Path) -> tuple[Any, Any]:
    """BFCL's ast_checker and Language enum, without importing its model handlers (they need API SDKs)."""
    sys.path.insert(0, str(package_root))
    stub = types.ModuleType("bfcl_eval.constants.model_config")

    class _OpenAiStyle:
        underscore_to_dot = True  # tool names with "." sent as "_", as for OpenAI models

    stub.MODEL_CONFIG_MAPPING = collections.defaultdict(_OpenAiStyle)  # type: ignore[attr-defined]
    sys.modules["bfcl_eval.constants.model_config"] = stub
    from bfcl_eval.constants.enums import Language  # type: ignore[import-not-found]
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # type: ignore[import-not-found]
    return ast_checker, Language


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "zz"
    if isinstance(value, list):
        return value[:-1] if value else ["zz"]
    return {**value, "zz_extra": 1} if isinstance(value, dict) else value


def _replies(expected: dict[str, Any], source_language: bool) -> list[dict[str, Any]]:
    base, options = expected["arguments"], expected["options"]
    out = [base]
    for key, choices in options.items():
        out += [{**base, key: resolve(c)} for c in choices[1:] if c != ""]
        if key in base:
            out.append({k: v for k, v in base.items() if k != key})
            out.append({**base, key: _changed(base[key])})
            if source_language and isinstance(base[key], str):
                for a, b in (('"', "'"), ("new ArrayList<>(", "new ArrayList<Object>("), (", ", ","), ("{", "{ ")):
                    if a in base[key]:
                        out.append({**base, key: base[key].replace(a, b)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package_root", type=Path, help="folder holding the unpacked bfcl_eval package")
    args = ap.parse_args()
    data = args.package_root / "bfcl_eval" / "data"
    ast_checker, language = _load_bfcl_checker(args.package_root)
    with tempfile.TemporaryDirectory() as tmp:
        files = sorted(data.glob("BFCL_v4_*.json"))
        subprocess.run([sys.executable, "-m", "verifier.cli", "suites", "import", "bfcl", *map(str, files),
                        "--out", tmp], check=True, stdout=subprocess.DEVNULL)
        same = collections.Counter()
        canonical = collections.Counter()
        for cat in SINGLE_CALL:
            name = f"BFCL_v4_{cat}.json"
            questions = {json.loads(ln)["id"]: json.loads(ln) for ln in (data / name).read_text().splitlines() if ln}
            answers = {json.loads(ln)["id"]: json.loads(ln)
                       for ln in (data / "possible_answer" / name).read_text().splitlines() if ln}
            lang = {"simple_java": language.JAVA, "simple_javascript": language.JAVASCRIPT}.get(cat, language.PYTHON)
            for line in (Path(tmp) / f"BFCL_v4_{cat}.verifier.jsonl").read_text().splitlines():
                case = json.loads(line)
                exp = case["_meta"].get("expected")
                if not exp:
                    continue
                cid = case["_meta"]["id"]
                schema = next(t["function"]["parameters"] for t in case["tools"]
                              if t["function"]["name"] == exp["tool"])

                def bfcl(reply: dict[str, Any]) -> bool:
                    return ast_checker(questions[cid]["function"], [{exp["tool"]: reply}],  # noqa: B023
                                       answers[cid]["ground_truth"], lang, cat, "gpt_4o_FC")["valid"]  # noqa: B023

                canonical[bfcl(exp["arguments"])] += 1
                for reply in _replies(exp, lang != language.PYTHON):
                    if any(True for _ in validator_for(schema)(schema).iter_errors(reply)):
                        continue  # schema-invalid replies fail before options are consulted
                    same[(cat, args_match_options(reply, exp["options"]) == bfcl(reply))] += 1
    total = sum(same.values())
    agree = sum(n for (_, ok), n in same.items() if ok)
    print(f"canonical answers BFCL's checker accepts: {canonical[True]} / {sum(canonical.values())}")
    print(f"replies with the same verdict: {agree} / {total} ({agree / total:.4f})")
    for cat in SINGLE_CALL:
        n = same[(cat, True)] + same[(cat, False)]
        print(f"  {cat}: {same[(cat, True)]} / {n}")


if __name__ == "__main__":
    main()

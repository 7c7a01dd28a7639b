"""Generate the cache suites: multi-turn sessions with growing shared prefixes.

``cache-smoke``: small prompts for the built-in tiny model (its context is small).
``cache-long``: prompts over 1,024 tokens from the first request on, because real providers cache only
long prefixes (OpenAI: from 1,024 prompt tokens, in 128-token steps).

Two session groups: ``growing`` sessions have their own system prompt (their prefix is shared only with
their own earlier turns); ``shared_system`` sessions all start with one long system prompt, so a
provider's cross-session prefix cache shows up too. Assistant turns are fixed text from the suite (not
the model's output), so every endpoint receives byte-identical prompts and the cacheable bound is the
same for all. Deterministic: ``python suites/cache/build.py`` rewrites the same files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORDS = ("system service request policy record account ticket invoice customer order shipment warehouse "
         "schedule report backup server cluster region latency budget review approval owner deadline priority "
         "status update team release version deploy rollback incident alert metric dashboard query index table "
         "column partition replica cache token session user profile permission audit log event queue worker").split()


def _para(rng: random.Random, n_words: int) -> str:
    out, sentence = [], []
    for _ in range(n_words):
        sentence.append(rng.choice(WORDS))
        if len(sentence) >= rng.randint(8, 14):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


def sessions(name: str, *, n_growing: int, n_shared: int, system_words: int, turn_words: int, reply_words: int,
             turns: int, max_tokens: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    shared = "You are the operations assistant. Follow the handbook below.\n" + _para(rng, system_words)
    out = []
    for i in range(n_growing + n_shared):
        group = "growing" if i < n_growing else "shared_system"
        system = shared if group == "shared_system" else (
            f"You are assistant #{i}. Reference notes follow.\n" + _para(rng, system_words))
        ts = [{"user": f"Question {t + 1}: " + _para(rng, turn_words), "assistant": _para(rng, reply_words)}
              for t in range(turns)]
        out.append({"id": f"{name}-{group}-{i:02d}", "group": group, "system": system, "turns": ts,
                    "max_tokens": max_tokens})
    return out


SUITES = {
    "cache-smoke": dict(n_growing=4, n_shared=4, system_words=60, turn_words=18, reply_words=12, turns=4,
                        max_tokens=4, seed=1),
    "cache-long": dict(n_growing=6, n_shared=6, system_words=1300, turn_words=160, reply_words=90, turns=5,
                       max_tokens=8, seed=2),
}

if __name__ == "__main__":
    for name, kw in SUITES.items():
        path = HERE / f"{name}.jsonl"
        rows = sessions(name, **kw)
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        print(f"wrote {path} ({len(rows)} sessions)")

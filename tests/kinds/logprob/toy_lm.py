"""A toy word-level language model served through the scripted loopback server, for logprob-suite tests.

Its full next-token distribution is known (so tests compare against exact KL), and a ``noise`` knob makes
a "quantized" twin. It answers chat (logprobs.content), legacy completions (echo + logprobs, and plain
generation) and 404s everything else, like an OpenAI-compatible provider without extensions.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
from scipy.special import log_softmax

from verifier.testing import Reply

VOCAB = [" " + w
         for w in "the a of to and in is it you that was for on are with as his they be at one have this from".split()]


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s*\S+|\s+", text)


class ToyLM:
    def __init__(self, noise: float = 0.0, temp: float = 2.5, logprobs: bool = True) -> None:
        self.noise, self.temp, self.logprobs = noise, temp, logprobs

    def dist(self, context: list[str]) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256("".join(context[-2:]).encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        logits = rng.standard_normal(len(VOCAB)) * self.temp
        if self.noise:
            logits = logits + np.random.default_rng(seed + 1).standard_normal(len(VOCAB)) * self.noise
        return log_softmax(logits)

    def _entry(self, ctx: list[str], tok: str, k: int) -> tuple[float, list[tuple[str, float]]]:
        d = self.dist(ctx)
        order = np.argsort(-d)[:k]
        lp = float(d[VOCAB.index(tok)]) if tok in VOCAB else -30.0
        return lp, [(VOCAB[i], float(d[i])) for i in order]

    def generate(self, ctx: list[str], n: int, temperature: float = 0.0, seed: int | None = None) -> list[str]:
        """Greedy, or sampled from the model's own distribution at ``temperature`` 1 (seeded, like the engine)."""
        out: list[str] = []
        rng = np.random.default_rng(seed)
        for _ in range(n):
            d = self.dist(ctx + out)
            if temperature > 0:
                tok = VOCAB[int(rng.choice(len(VOCAB), p=np.exp(d) / np.exp(d).sum()))]
            else:
                tok = VOCAB[int(np.argmax(d))]
            out.append(tok)
        return out

    def __call__(self, body: dict, ctx) -> Reply:
        k = body.get("top_logprobs") or body.get("logprobs") or 0
        if ctx.path.endswith("/chat/completions"):
            prompt = _tokens(" ".join(str(m.get("content") or "") for m in body["messages"]))
            gen = self.generate(prompt, body.get("max_tokens", 8))
            lps = None
            if body.get("logprobs") and self.logprobs:
                lps = []
                for i, t in enumerate(gen):
                    lp, top = self._entry(prompt + gen[:i], t, k)
                    lps.append({"token": t, "logprob": lp, "bytes": list(t.encode()),
                                "top_logprobs": [{"token": s, "logprob": v, "bytes": list(s.encode())}
                                                 for s, v in top]})
            return Reply(content="".join(gen), logprobs=lps)
        if ctx.path.endswith("/completions") and self.logprobs and "prompt_logprobs" not in body:
            prompt = _tokens(body["prompt"])
            gen = self.generate(prompt, body.get("max_tokens", 16), body.get("temperature") or 0.0, body.get("seed"))
            toks = (prompt if body.get("echo") else []) + gen
            base = 0 if body.get("echo") else len(prompt)
            lp_list, tops = [], []
            for i, t in enumerate(toks):
                j = base + i
                if j == 0:
                    lp_list.append(None)
                    tops.append(None)
                    continue
                lp, top = self._entry((prompt + gen)[:j], t, body.get("logprobs") or 1)
                lp_list.append(lp)
                tops.append(dict(top))
            text = "".join(toks)
            return Reply(body={"id": "cmpl-1", "object": "text_completion", "model": body.get("model"),
                               "choices": [{"index": 0, "text": text, "finish_reason": "length",
                                            "logprobs": {"tokens": toks, "token_logprobs": lp_list,
                                                         "top_logprobs": tops, "text_offset": []}}],
                               "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(gen)}})
        return Reply.error(404, "not found", type_="not_found")

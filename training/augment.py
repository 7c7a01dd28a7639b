"""Training-only diversity for a model that must generalise to phrasings it never saw.

Why: the catalogue has three training phrasings per tool and twenty small-talk requests, so a tiny model
memorises them and, on the held-out evaluation phrasings, fires tools at small talk and picks tools from
memory. Two cheap remedies, both applied only to training text and both disjoint from the evaluation
phrasings (tests check that no generated request equals an evaluation one):

- :func:`small_talk` composes thousands of no-tool requests (questions, writing tasks, greetings) from
  its own templates and topics;
- :func:`perturb_request` rewrites a tool request's wording (synonym verbs, politeness, fillers, case)
  without touching any argument value, so the model keys on the values and domain words rather than on
  one template's exact words.
"""

from __future__ import annotations

import random
import re
from typing import Any

_TOPICS = (
    "volcanoes", "the moon", "bees", "rainbows", "black holes", "the printing press", "glaciers", "coral reefs",
    "the internet", "vaccines", "democracy", "jazz", "chess", "the Roman empire", "photosynthesis in cacti",
    "tides", "electric cars", "the water cycle", "compound interest", "friendship", "penguins", "deserts",
    "the Renaissance", "earthquakes", "honey", "origami", "the Silk Road", "solar eclipses", "dinosaurs",
    "bread", "coffee", "migration of birds", "the Olympics", "lighthouses", "snowflakes", "magnets",
    "the human heart", "rivers", "bamboo", "fireflies", "the alphabet", "windmills", "pyramids", "owls",
    "autumn", "the ocean floor", "robots", "kindness", "patience", "courage", "libraries", "trains",
)
_QUESTION_FORMS = (
    "What is {t}?", "Tell me something interesting about {t}.", "Why are people fascinated by {t}?",
    "Can you describe {t} in simple words?", "What should everyone know about {t}?", "How would you explain {t}?",
    "Give me a short overview of {t}.", "What are {t} like?", "Teach me one thing about {t}.",
    "What is the history of {t}?", "Describe {t} for a child.", "I'm curious about {t}. Any thoughts?",
)
_WRITING_FORMS = (
    "Write a short poem about {t}.", "Compose a story opening about {t}.", "Draft a riddle about {t}.",
    "Come up with a slogan about {t}.", "Write a tweet-length thought on {t}.", "Make up a fable about {t}.",
    "Create a song chorus about {t}.", "Write a couplet on {t}.",
)
_SOCIAL = (
    "Hello there!", "Good evening!", "How is your day going?", "Nice to meet you.", "You are very helpful, thank you.",
    "Never mind, forget it.", "That was great, thanks a lot.", "Can you keep me company for a minute?",
    "I'm bored. Talk to me.", "What can you do?", "Are you a robot?", "See you later!", "Thanks again!",
)
_ADVICE_FORMS = (
    "How can I get better at {a}?", "Any tips for {a}?", "What is a good way to start {a}?",
    "Is {a} hard to learn?", "Why do people enjoy {a}?", "How much time does {a} take to master?",
)
_ACTIVITIES = (
    "drawing", "public speaking", "gardening", "learning French", "running", "knitting", "saving money",
    "cooking rice", "writing essays", "playing guitar", "meditation", "time management", "swimming", "negotiating",
)
_ARITHMETIC = ("What is {a} plus {b}?", "What is {a} minus {b}?", "How much is {a} times {b}?", "Is {a} bigger than {b}?")


def small_talk(rng: random.Random) -> str:
    """One request that no tool can serve: knowledge, writing, advice, arithmetic or social talk."""
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(_QUESTION_FORMS).format(t=rng.choice(_TOPICS))
    if kind < 0.55:
        return rng.choice(_WRITING_FORMS).format(t=rng.choice(_TOPICS))
    if kind < 0.7:
        return rng.choice(_ADVICE_FORMS).format(a=rng.choice(_ACTIVITIES))
    if kind < 0.85:
        return rng.choice(_SOCIAL)
    return rng.choice(_ARITHMETIC).format(a=rng.randint(2, 99), b=rng.randint(2, 99))


#: verb or phrase -> alternatives with the same meaning in a request
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "show": ("display", "give me", "list"), "find": ("look up", "search for", "locate"),
    "create": ("make", "set up", "add"), "send": ("deliver", "shoot over"), "get": ("fetch", "retrieve"),
    "tell me": ("let me know", "show me"), "i need": ("i want", "i'd like"), "please": ("kindly", ""),
    "check": ("look at", "verify"), "add": ("put", "include"), "update": ("change", "modify"),
    "delete": ("remove", "erase"), "book": ("reserve",), "new": ("a new", "fresh"),
}
_PREFIXES = ("", "", "", "Please ", "Could you ", "Can you ", "I'd like you to ", "Go ahead and ", "Now ")
_SUFFIXES = ("", "", "", " please", " for me", " now", " asap", " if you can", " thank you")


def perturb_request(text: str, args: dict[str, Any], rng: random.Random) -> str:
    """Reword ``text`` without changing any substring that carries an argument value."""
    protected = [m.lower() for m in _value_strings(args) if m]

    def safe(word: str) -> bool:
        return not any(word in p for p in protected)

    out = text
    for word, alts in _SYNONYMS.items():
        if rng.random() < 0.5 and safe(word):
            pattern = re.compile(rf"\b{re.escape(word)}\b", re.IGNORECASE)
            if pattern.search(out):
                out = pattern.sub(rng.choice(alts), out, count=1)
    out = re.sub(r"\s+", " ", out).strip()
    if not out:
        return text
    prefix, suffix = rng.choice(_PREFIXES), rng.choice(_SUFFIXES)
    if prefix and out[:1].isupper() and not _starts_with_value(out, protected):
        out = prefix + out[0].lower() + out[1:]
    if suffix and out[-1:] in ".?!" and not _ends_with_value(out, protected):
        out = out[:-1] + suffix + out[-1]
    return out


def _starts_with_value(text: str, protected: list[str]) -> bool:
    head = text.lower()
    return any(p and head.startswith(p) for p in protected)


def _ends_with_value(text: str, protected: list[str]) -> bool:
    tail = text.lower()
    return any(p and (tail.endswith(p) or tail[:-1].endswith(p)) for p in protected)


def _value_strings(value: Any) -> list[str]:
    """Every scalar inside an argument object, as text (keys too: they may appear in the request)."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [str(k), *_value_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _value_strings(v)]
    return [] if value is None else [str(value)]

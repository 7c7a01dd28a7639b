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

import json
import random
import re
from collections.abc import Callable
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
_ARITHMETIC = ("What is {a} plus {b}?", "What is {a} minus {b}?", "How much is {a} times {b}?",
               "Is {a} bigger than {b}?")


#: kinds of small talk the forms above miss: asking for something made up, comparisons, who/when
#: questions, explaining to someone, social how-tos, and knowledge questions about the catalogue's own
#: domains (a tool's domain word in a request that no tool serves: the hardest negatives)
_ASK_FORMS = ("Give me a {x}.", "Suggest a {x}.", "Can you come up with a {x}?", "Recommend a {x}.",
              "Think of a {x} for me.", "I'd love a {x}.")
_ASK_THINGS = (
    "nickname for a parrot", "name for a coffee shop", "fun fact", "tongue twister", "riddle for kids",
    "pun about bread", "word that means very tired", "title for a travel blog", "birthday message for a colleague",
    "toast for a wedding", "compliment for a friend", "catchy team name", "bedtime story idea",
    "hobby to try this year", "saying about courage", "metaphor for time", "board game for four people",
)
_COMPARE_FORMS = ("How is {a} different from {b}?", "How can I tell {a} from {b}?",
                  "Which came first, {a} or {b}?", "Are {a} and {b} related?")
_COMPARE_PAIRS = (
    ("frogs", "toads"), ("a lake", "a pond"), ("a comet", "an asteroid"), ("baking soda", "baking powder"),
    ("a violin", "a viola"), ("crocodiles", "alligators"), ("a hurricane", "a typhoon"), ("a star", "a planet"),
    ("jam", "jelly"), ("a novel", "a novella"), ("latitude", "longitude"), ("speed", "velocity"),
)
_WHO_FORMS = ("Who invented {i}?", "When was {i} invented?", "Where was {i} first used?", "Who made {i} popular?")
_INVENTIONS = ("the telephone", "the light bulb", "the bicycle", "paper", "the compass", "the radio",
               "the umbrella", "the piano", "eyeglasses", "the zipper", "the telescope", "chess clocks")
_EXPLAIN_FORMS = ("Explain {t} to {p}.", "How would you describe {t} to {p}?", "Make {t} easy for {p} to understand.")
_AUDIENCES = ("a beginner", "my grandmother", "a curious kid", "a busy manager", "someone from the 1800s")
_SOCIAL_HOWTO = ("How do I {s}?", "What's a kind way to {s}?", "Any advice on how to {s}?")
_SOCIAL_TASKS = ("apologise to a friend", "say no to extra work", "start a conversation at a party",
                 "thank a teacher", "ask for feedback", "end a phone call politely", "welcome a new neighbour",
                 "cheer up a sad friend")
_DOMAIN_FORMS = ("How did the word '{d}' come about?", "What is the history of the {d}?",
                 "Why do people like talking about the {d}?", "Is the {d} a modern idea?")
_DOMAINS = ("stock market", "calendar", "thermostat", "spreadsheet", "database", "currency", "passport",
            "podcast", "recipe", "weather forecast", "email", "invoice", "playlist", "hotel", "movie ticket")


def _compare(rng: random.Random) -> str:
    a, b = rng.choice(_COMPARE_PAIRS)
    return rng.choice(_COMPARE_FORMS).format(a=a, b=b)


_Kinds = tuple[tuple[float, Callable[[random.Random], str]], ...]

#: (cumulative share, maker) per kind of small talk: the five kinds of the shipped recipe
_BASIC_KINDS: _Kinds = (
    (0.35, lambda rng: rng.choice(_QUESTION_FORMS).format(t=rng.choice(_TOPICS))),
    (0.55, lambda rng: rng.choice(_WRITING_FORMS).format(t=rng.choice(_TOPICS))),
    (0.7, lambda rng: rng.choice(_ADVICE_FORMS).format(a=rng.choice(_ACTIVITIES))),
    (0.85, lambda rng: rng.choice(_SOCIAL)),
    (1.0, lambda rng: rng.choice(_ARITHMETIC).format(a=rng.randint(2, 99), b=rng.randint(2, 99))),
)
#: the same five plus requests for something made up, comparisons, who/when questions, explaining to
#: someone, social how-tos and questions about a tool domain itself. Why: every checkpoint up to v5 called
#: a tool on 13 or more of the 45 held-out small-talk requests, which are kinds the five never produce
#: ("Suggest a ...", "Who ...?", "Explain ... to ..."); a tool domain's word in a request that no tool
#: serves is the hardest negative.
_WIDE_KINDS: _Kinds = (
    (0.25, _BASIC_KINDS[0][1]), (0.37, _BASIC_KINDS[1][1]), (0.46, _BASIC_KINDS[2][1]),
    (0.56, _BASIC_KINDS[3][1]), (0.63, _BASIC_KINDS[4][1]),
    (0.72, lambda rng: rng.choice(_ASK_FORMS).format(x=rng.choice(_ASK_THINGS))),
    (0.79, _compare),
    (0.85, lambda rng: rng.choice(_WHO_FORMS).format(i=rng.choice(_INVENTIONS))),
    (0.9, lambda rng: rng.choice(_EXPLAIN_FORMS).format(t=rng.choice(_TOPICS), p=rng.choice(_AUDIENCES))),
    (0.95, lambda rng: rng.choice(_SOCIAL_HOWTO).format(s=rng.choice(_SOCIAL_TASKS))),
    (1.0, lambda rng: rng.choice(_DOMAIN_FORMS).format(d=rng.choice(_DOMAINS))),
)


def small_talk(rng: random.Random, wide: bool = False) -> str:
    """One request that no tool can serve: knowledge, writing, advice, arithmetic or social talk, and with
    ``wide`` six more kinds (``_WIDE_KINDS``). The default keeps the shipped recipe's draws, so its corpus
    stays reproducible."""
    kind = rng.random()
    kinds = _WIDE_KINDS if wide else _BASIC_KINDS
    return next(make for limit, make in kinds if kind < limit)(rng)


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


# --------------------------------------------------------------------------- value scrambling

_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
#: a number in running text, not part of a date, time, decimal or id
_NUMBER_EDGE = r"(?<![\w.:/-]){}(?![\w:/-]|\.\d)"


def scramble_values(text: str, arguments: dict[str, Any], schema: dict[str, Any],
                    rng: random.Random) -> tuple[str, dict[str, Any]] | None:
    """The same request with fresh argument values, consistently in the text and the expected call.

    Why: the catalogue draws values from short lists (a few dozen cities, names, titles), so a tiny model
    lowers its loss fastest by guessing a likely value instead of copying the one in the request, and then
    writes "Lima" for "Dublin". Replacing stated values with pseudo-words and random numbers the model has
    never seen leaves copying as the only way to be right. Only free-text strings (no enum, const, format)
    and integers stated once in the text are replaced; a string with a pattern only has its digits
    redrawn, kept if the pattern still matches. Returns None when nothing could be replaced or the new
    arguments would not validate (the caller keeps the original case).
    """
    from verifier.kinds.toolcall.checks import check_call

    replacements: dict[str, str] = {}
    new_args = _scramble_node(arguments, schema, text, rng, replacements)
    if not replacements:
        return None
    new_text = text
    for old, new in replacements.items():
        if old.isdigit():
            new_text = re.sub(_NUMBER_EDGE.format(re.escape(old)), new, new_text, count=1)
        else:
            new_text = new_text.replace(old, new)
    if not check_call("t", json.dumps(new_args), {"t": schema}).valid:
        return None
    return new_text, new_args


def _scramble_node(value: Any, schema: Any, text: str, rng: random.Random, out: dict[str, str]) -> Any:
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        return {k: _scramble_node(v, props.get(k), text, rng, out) for k, v in value.items()}
    if isinstance(value, list):
        return [_scramble_node(v, schema.get("items"), text, rng, out) for v in value]
    if any(k in schema for k in ("enum", "const", "format")):
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return _scramble_int(value, schema, text, rng, out)
    if isinstance(value, str) and len(value) >= 3 and value in text and text.count(value) == 1:
        if value in out:
            return out[value]
        new = _redraw_digits(value, rng) if "pattern" in schema else _pseudo_phrase(value, rng)
        if new == value or new in text or new in out.values():
            return value
        if "pattern" in schema and not re.search(schema["pattern"], new):
            return value
        if not (schema.get("minLength", 0) <= len(new) <= schema.get("maxLength", 10**9)):
            return value
        out[value] = new
        return new
    return value


def _scramble_int(value: int, schema: dict[str, Any], text: str, rng: random.Random, out: dict[str, str]) -> int:
    old = str(value)
    if old in out or len(re.findall(_NUMBER_EDGE.format(re.escape(old)), text)) != 1:
        return value
    lo, hi = schema.get("minimum", 1), schema.get("maximum", max(99, value * 3))
    new = rng.randint(int(lo), int(hi))
    if str(new) == old or str(new) in out.values() or re.search(_NUMBER_EDGE.format(str(new)), text):
        return value
    out[old] = str(new)
    return new


def _redraw_digits(value: str, rng: random.Random) -> str:
    return "".join(str(rng.randint(0, 9)) if c.isdigit() else c for c in value)


def _pseudo_phrase(value: str, rng: random.Random) -> str:
    """Each alphabetic word becomes a pronounceable made-up word of similar length and the same case;
    digits are redrawn; everything else (punctuation, spacing, '@', '/') stays."""
    def word(m: re.Match[str]) -> str:
        w = m.group(0)
        made = "".join((_CONSONANTS
                        if i % 2 == 0 else _VOWELS)[rng.randrange(len(_CONSONANTS if i % 2 == 0 else _VOWELS))]
                       for i in range(max(2, len(w) + rng.randint(-1, 1))))
        if w.isupper() and len(w) > 1:
            return made.upper()
        return made.capitalize() if w[0].isupper() else made
    return re.sub(r"\d", lambda _: str(rng.randint(0, 9)), re.sub(r"[A-Za-z]+", word, value))


# --------------------------------------------------------------------------- tool renaming

_VERB_ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "get": ("fetch", "lookup", "read"), "create": ("make", "new", "add"), "search": ("find", "query", "lookup"),
    "set": ("update", "configure"), "send": ("post", "deliver"), "list": ("show", "fetch"), "book": ("reserve",),
    "add": ("append", "insert"), "update": ("edit", "modify"), "run": ("execute", "start"), "track": ("trace",
                                                                                                      "follow"),
    "read": ("open", "load"), "write": ("save", "store"), "convert": ("transform",), "check": ("verify", "inspect"),
}
_SUFFIXES_FOR_NAMES = ("_v2", "_tool", "_api", "_fn")

#: words for arbitrary tool names: none is a verb or noun of the catalogue's tool names, so a name made of them says
#: nothing about what the tool does and a pair of them cannot be learnt as one tool's alias
_NAME_WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
               "kestrel", "lagoon", "maple", "nimbus", "onyx", "pebble", "quartz", "raven", "sierra", "tundra",
               "umber", "velvet", "willow", "yarrow", "zephyr", "alder", "bramble", "cobalt", "dune", "falcon",
               "glacier", "heron", "iris", "jasper", "krill", "lotus", "marble", "nectar", "orchid", "prism",
               "quill", "ripple", "saffron", "thistle", "violet", "walnut", "yonder", "zinnia")

#: how ``tool_renaming`` makes a new name: ``variants`` (v7 and earlier) a plausible alias of the old name,
#: ``arbitrary`` two unrelated words drawn afresh for every case
RENAME_STYLES = ("variants", "arbitrary")


def arbitrary_tool_name(rng: random.Random) -> str:
    """Two or three words of ``_NAME_WORDS``: about 110,000 names, drawn with no regard to the tool."""
    return "_".join(rng.choice(_NAME_WORDS) for _ in range(rng.choice((2, 2, 3))))


def tool_name_variant(name: str, rng: random.Random) -> str:
    """Another plausible name for the same tool: a synonym verb, the verb dropped, or a version suffix."""
    words = name.split("_")
    choice = rng.random()
    if choice < 0.45 and words[0] in _VERB_ALTERNATIVES:
        return "_".join([rng.choice(_VERB_ALTERNATIVES[words[0]]), *words[1:]])
    if choice < 0.7 and len(words) >= 3:
        return "_".join(words[1:])
    return name + rng.choice(_SUFFIXES_FOR_NAMES)


def rename_tools(body: dict[str, Any], expected: dict[str, Any] | None,
                 rng: random.Random, style: str = "variants") -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The same case with every offered tool renamed (in the tool list, in earlier tool calls and in the
    expected call).

    Why: with the catalogue's fixed names a model can recall the tool for a request from memory and never
    read the offered list, so it names tools that are not offered. Renamed tools can only be named by
    copying from the list.
    """
    return apply_renaming(body, expected, tool_renaming(body, rng, style))


def tool_renaming(body: dict[str, Any], rng: random.Random, style: str = "variants") -> dict[str, str]:
    """A new name for each tool ``body`` offers (old -> new, all distinct); see :func:`rename_tools`.
    Drawn once per tool list, so cases that share the list (a training group) share the names too.

    Why ``arbitrary``: with ``variants`` each tool has a handful of aliases (``lookup_forecast``,
    ``get_forecast_v2``), and a model trained long enough learns them as more names of the tool and writes one
    from memory where only the original is offered (v7's recipe with 4 KV heads at 19,400 steps: 10 of its 20
    wrong tool names on validation cases were such aliases). An arbitrary name can only be copied from the
    list, after the tool was chosen by its description."""
    if style not in RENAME_STYLES:
        raise ValueError(f"rename style must be one of {RENAME_STYLES}, not {style!r}")
    mapping: dict[str, str] = {}
    for t in body.get("tools") or []:
        old = t["function"]["name"]
        for _ in range(4):
            new = arbitrary_tool_name(rng) if style == "arbitrary" else tool_name_variant(old, rng)
            if new not in mapping.values() and new != old:
                mapping[old] = new
                break
    return mapping


def apply_renaming(body: dict[str, Any], expected: dict[str, Any] | None,
                   mapping: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``body`` and ``expected`` with tool names replaced by ``mapping`` wherever they occur."""
    if not mapping:
        return body, expected
    tools = [{**t, "function": {**t["function"], "name": mapping.get(t["function"]["name"], t["function"]["name"])}}
             for t in body["tools"]]
    messages = []
    for m in body["messages"]:
        if m.get("tool_calls"):
            m = {**m, "tool_calls": [{**c, "function": {**c["function"],
                                                        "name": mapping.get(c["function"]["name"],
                                                                            c["function"]["name"])}}
                                     for c in m["tool_calls"]]}
        messages.append(m)
    if expected is not None:
        expected = {**expected, "tool": mapping.get(expected["tool"], expected["tool"])}
    return {**body, "tools": tools, "messages": messages}, expected

"""Synthetic training corpus: single-turn tool-call conversations and agent trajectories.

Sources, in order of preference:
- tool calls: ``suites.toolcall.catalog.generate_cases(seed, n, training.phrasings.TRAIN_PHRASINGS)`` (the toolcall-core
  tool schemas with *training* phrasings and seeds, disjoint from the evaluation ones); when that module
  is not importable, the small stand-in catalogue in ``training/standin_catalog.py`` (so the pipeline can
  be exercised on its own, never for the shipped model).
- agent trajectories: ``suites.agent`` environments driven by their oracle ``next_action()`` with seeds
  far from the evaluation seeds (the built-in agent suites use seed 0).

Every example is a :class:`Conversation` (OpenAI-shape messages + tools) rendered by the shipped chat
template, so training text and serving text cannot drift apart.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from training.augment import apply_renaming, perturb_request, rename_tools, scramble_values, small_talk, tool_renaming
from training.chat_format import CHAT_TEMPLATE, IM_START, assistant_spans, assistant_tool_message, render

if TYPE_CHECKING:
    from suites.agent.base import Action, Environment, ToolOutcome

#: agent seeds for training start here; evaluation suites use small seeds (agent-smoke: 0)
AGENT_TRAIN_SEED_BASE = 100_000
#: short fixed replies when no offered tool fits (the model only has to learn *that* it answers in text)
NO_TOOL_REPLIES = [
    "I can't do that with the tools I have.",
    "None of the available tools can help with that.",
    "Sorry, I have no tool for that request.",
]
AGENT_FINAL_REPLY = "Done: the task is complete."
#: share of training requests that no offered tool fits (the evaluation suite has 0.3; the model errs
#: toward calling, so training leans the other way a little)
NO_TOOL_SHARE = 0.35
#: share of small-talk requests replaced by generated ones, and of tool requests reworded
SMALL_TALK_SHARE = 0.8
PERTURB_SHARE = 0.5
#: share of tool requests whose stated values are replaced by fresh ones (so the model must copy them)
SCRAMBLE_SHARE = 0.5
#: share of tool-call examples whose offered tools are renamed (so names are read from the list, not recalled)
RENAME_SHARE = 0.4


@dataclass
class Conversation:
    """One training example: messages + offered tools; every assistant turn is supervised except those whose
    ordinals (0 = the first assistant message) ``unsupervised_turns`` lists: a slip shown as context, which the
    model must read but never learn to make (:func:`agent_conversations`, ``slip_share``)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    unsupervised_turns: tuple[int, ...] = ()

    def text(self, template: str = CHAT_TEMPLATE) -> str:
        return render(self.messages, self.tools, template=template)

    def unsupervised_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the unsupervised assistant turns in ``text`` (this conversation's rendering)."""
        if not self.unsupervised_turns:
            return []
        spans = assistant_spans(text)
        return [spans[k] for k in self.unsupervised_turns]

    def text_and_starts(self, template: str = CHAT_TEMPLATE) -> tuple[str, list[int]]:
        """The training text, and where continuations of a shared prefix start in it: none here (see
        :class:`ConversationGroup`)."""
        return self.text(template), []


#: where a conversation's final request begins in its rendered text (the shared prefix of a group ends there)
FINAL_REQUEST_MARK = f"{IM_START}user\n"


@dataclass
class ConversationGroup:
    """Conversations that differ only in their final request and answer: same system prompt, tools and
    history. Training computes the shared part once for all of them (``training.train``, shared-prefix rows).

    Its training text is the shared prefix followed by each member's final exchange
    (:meth:`text_and_starts` also gives where each exchange begins). Every exchange starts with a special token
    (``<|im_start|>``), so the
    tokens of this text are exactly the prefix's tokens followed by each exchange's own.
    """

    members: list[Conversation]
    source: str = ""

    def parts(self, template: str = CHAT_TEMPLATE) -> tuple[str, list[str]]:
        """(shared prefix text, each member's final exchange text)."""
        prefix = ""
        finals: list[str] = []
        for c in self.members:
            full = c.text(template)
            cut = full.rindex(FINAL_REQUEST_MARK)
            if finals and full[:cut] != prefix:
                raise ValueError(f"group members differ before their final request ({self.source})")
            prefix = full[:cut]
            finals.append(full[cut:])
        return prefix, finals

    def text_and_starts(self, template: str = CHAT_TEMPLATE) -> tuple[str, list[int]]:
        """The training text and the character offset at which each member's final exchange begins in it,
        from one rendering of the members (corpus preparation is paid for out of the training budget)."""
        prefix, finals = self.parts(template)
        starts, at = [], len(prefix)
        for f in finals:
            starts.append(at)
            at += len(f)
        return prefix + "".join(finals), starts

    def unsupervised_spans(self, text: str) -> list[tuple[int, int]]:
        """None: a group's members are single requests, every answer supervised."""
        return []


def _body_to_conversation(body: dict[str, Any], expected: dict[str, Any] | None, rng: random.Random,
                          source: str) -> Conversation:
    """Append the expected answer (a tool call, or a short refusal) to a request body's messages."""
    messages = [dict(m) for m in body["messages"]]
    if expected is None:
        messages.append({"role": "assistant", "content": rng.choice(NO_TOOL_REPLIES)})
    else:
        messages.append(assistant_tool_message(expected["tool"], expected.get("arguments") or {}))
    return Conversation(messages=messages, tools=body.get("tools"), source=source)


def _case_parts(case: Any) -> tuple[dict[str, Any], Any]:
    """(body, expected) from a catalogue case, whatever its carrier: ToolcallCase-like object or dict line."""
    if isinstance(case, tuple):  # catalogue: (body, _meta)
        body, meta = case
        return body, (meta or {}).get("expected", "absent")
    if isinstance(case, dict):
        body = {k: v for k, v in case.items() if k != "_meta"}
        meta = case.get("_meta") or {}
        return body, meta.get("expected", "absent")
    body = case.body
    expected = getattr(case, "expected", "absent")
    if hasattr(expected, "model_dump"):
        expected = expected.model_dump()
    return body, expected


def toolcall_conversations(n: int, seed: int, contrast_share: float = 0.0,
                           wide_small_talk: bool = False, rename_style: str = "variants") -> Iterator[Conversation]:
    """``n`` single-turn tool-call conversations from the catalogue's training templates.

    With ``contrast_share`` > 0, that share of the tool requests also comes as a contrast twin: the same
    request with the needed tool's domain group withheld from the offered tools, answered with a refusal
    (``suites.toolcall.catalog.withhold_tool``). Why: every run calls a tool for nearly every request whose
    tool is not offered; the wording of such a request says "call", and only the tool list says "refuse".
    In a pair that differs only in the list, the wording cannot predict the answer. ``wide_small_talk``
    draws generated small talk from more kinds (``training.augment.small_talk``). ``rename_style`` says how
    renamed tools are named (``training.augment.tool_renaming``).
    """
    rng = random.Random(seed)
    cases: list[Any]  # (body, meta) pairs from the catalog, or suite lines from the stand-in (_case_parts reads both)
    try:
        from suites.toolcall.catalog import generate_cases, withhold_tool  # type: ignore[import-not-found]
        from training.phrasings import TRAIN_PHRASINGS
        cases = generate_cases(seed, n, TRAIN_PHRASINGS, no_tool_share=NO_TOOL_SHARE)
        source = "toolcall-catalog"
    except ImportError:
        from training.standin_catalog import generate_cases as standin_cases
        cases = standin_cases(seed, n)
        source = "standin"
    for case in cases:
        body, expected = _case_parts(case)
        if expected == "absent":
            continue  # no ground truth: nothing to teach
        if source == "toolcall-catalog":
            tags = case[1].get("tags", []) if isinstance(case, tuple) else []
            body = _diversify(body, expected, tags, rng, wide_small_talk)
            if contrast_share and expected is not None and rng.random() < contrast_share:
                twin = withhold_tool(body, expected["tool"], rng)
                if twin is not None:
                    twin, _ = _renamed_sometimes(twin, None, rng, rename_style)
                    yield _body_to_conversation(twin, None, rng, "toolcall-contrast")
            body, expected = _renamed_sometimes(body, expected, rng, rename_style)
        yield _body_to_conversation(body, expected, rng, source)


def _renamed_sometimes(body: dict[str, Any], expected: dict[str, Any] | None, rng: random.Random,
                       style: str = "variants") -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``RENAME_SHARE`` of the time, the case with its offered tools renamed (``training.augment.rename_tools``)."""
    return rename_tools(body, expected, rng, style) if rng.random() < RENAME_SHARE else (body, expected)


def toolcall_groups(n: int, seed: int, size: int, rename_style: str = "variants") -> Iterator[ConversationGroup]:
    """About ``n`` tool-call conversations in groups of ``size`` that share system prompt, tools and
    history (``suites.toolcall.catalog.generate_case_groups``), each member diversified as in
    :func:`toolcall_conversations`; a renamed group renames its tools the same way for every member."""
    from suites.toolcall.catalog import generate_case_groups
    from training.phrasings import TRAIN_PHRASINGS

    rng = random.Random(seed)
    for group in generate_case_groups(seed, -(-n // size), size, TRAIN_PHRASINGS, no_tool_share=NO_TOOL_SHARE):
        mapping = tool_renaming(group[0][0], rng, rename_style) if rng.random() < RENAME_SHARE else {}
        members = []
        for body, meta in group:
            expected = meta["expected"]
            expected = None if expected is None else {**expected, "arguments": dict(expected["arguments"])}
            body = _diversify(body, expected, meta["tags"], rng)
            body, expected = apply_renaming(body, expected, mapping)
            members.append(_body_to_conversation(body, expected, rng, "toolcall-catalog"))
        yield ConversationGroup(members, source="toolcall-group")


def _diversify(body: dict[str, Any], expected: dict[str, Any] | None, tags: list[str],
               rng: random.Random, wide_small_talk: bool = False) -> dict[str, Any]:
    """Training-only rewording of the last user turn (see ``training.augment``): small talk drawn from a
    large generated pool instead of the catalogue's twenty requests; tool requests with fresh values (the
    expected arguments change with them: ``expected`` is updated in place) and reworded."""
    text = body["messages"][-1]["content"]
    if "no_tool:chat" in tags and rng.random() < SMALL_TALK_SHARE:
        text = small_talk(rng, wide_small_talk)
    elif expected is not None:
        if rng.random() < SCRAMBLE_SHARE:
            schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in body.get("tools") or []}
            scrambled = scramble_values(text, expected.get("arguments") or {}, schemas.get(expected["tool"], {}), rng)
            if scrambled is not None:
                text, new_args = scrambled
                expected["arguments"] = new_args
        if rng.random() < PERTURB_SHARE:
            text = perturb_request(text, expected.get("arguments") or {}, rng)
    if text == body["messages"][-1]["content"]:
        return body
    messages = [dict(m) for m in body["messages"]]
    messages[-1]["content"] = text
    return {**body, "messages": messages}


#: horizons the agent trajectories are drawn at (the shipped recipe's); see ``--agent-horizons`` of training.train
AGENT_HORIZONS: tuple[int, ...] = (4, 6, 8, 10, 12, 14)


#: a slip changes one digit of a string argument (or its last character when it has none): the copying error a
#: small model makes when it carries a file name or key from a tool result into its next call
_DIGIT = re.compile(r"[0-9]")


def slipped_action(action: Action, rng: random.Random) -> Action | None:
    """The oracle's ``action`` with one string argument miscopied (see ``_DIGIT``); None when it has no string."""
    from suites.agent.base import Action

    keys = [k for k, v in action.arguments.items() if isinstance(v, str) and v]
    if not keys:
        return None
    key = rng.choice(keys)
    value = action.arguments[key]
    digits = [m.start() for m in _DIGIT.finditer(value)]
    if digits:
        at = rng.choice(digits)
        wrong = rng.choice([d for d in "0123456789" if d != value[at]])
    else:
        at = len(value) - 1
        wrong = "x" if value[at] != "x" else "y"
    return Action(action.name, {**action.arguments, key: value[:at] + wrong + value[at + 1:]})


def _rejected_slip(env: Environment, action: Action, rng: random.Random) -> tuple[Action, ToolOutcome] | None:
    """(slipped action, its outcome) when the world refuses the slip and is left as it was; None otherwise.

    Only refused slips are shown: after one the oracle's next action is still right, so the trajectory
    teaches recovery (read the error, go back to the value in an earlier result). A slip the world accepts
    (a wrong value appended or saved) changes the task itself and is not drawn.
    """
    slip = slipped_action(action, rng)
    if slip is None:
        return None
    trial = copy.deepcopy(env)
    before = trial.state_digest()
    outcome = trial.run_action(slip)
    if outcome.error_kind is None or trial.state_digest() != before:
        return None
    return slip, env.run_action(slip)


def agent_conversations(n: int, seed: int, *, horizons: tuple[int, ...] = AGENT_HORIZONS,
                        max_turns: int = 14, slip_share: float = 0.0) -> Iterator[Conversation]:
    """``n`` oracle trajectories across all agent environments, trimmed to the last ``max_turns`` calls.

    A trimmed trajectory keeps the system prompt and goal (the runner always sends them) and then the most
    recent tool call/result pairs, so the model learns to act from recent turns, as the environments intend.

    With ``slip_share`` > 0, that share of the trajectories shows one slip: at a random step a call with a
    miscopied argument that the world refuses (:func:`_rejected_slip`), its error result, then the oracle's
    right call. The slip is context, not a target (``Conversation.unsupervised_turns``), and the cut keeps
    the recovery call. Why: oracle trajectories never contain an error, and v10, trained on them alone, after one
    miscopied file name repeated the same refused call until its step budget ended (training/JOURNAL.md, "twelfth
    session"). Slips come from their own random stream, so ``slip_share`` 0 gives the same corpus as before.
    """
    from suites.agent.scenarios import ENVIRONMENTS, SYSTEM_PROMPT, make_env

    rng = random.Random(seed)
    slip_rng = random.Random(f"slips-{seed}")
    names = sorted(ENVIRONMENTS)
    made = 0
    k = 0
    while made < n:
        env_name = names[k % len(names)]
        horizon = rng.choice([h for h in horizons if h >= ENVIRONMENTS[env_name].min_horizon])
        env_seed = AGENT_TRAIN_SEED_BASE + seed * 100_000 + k
        k += 1
        try:
            env = make_env(env_name, env_seed, horizon)
        except ValueError:
            continue
        head = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": env.goal()}]
        turns: list[list[dict[str, Any]]] = []
        slip_at: int | None = None  # the slip's turn index, when this trajectory shows one
        planned = slip_rng.randrange(horizon) if slip_share and slip_rng.random() < slip_share else None
        step = 0
        while (action := env.next_action()) is not None:
            # from the planned step on, until a slip the world refuses is found (a wrong appended value is not one)
            if planned is not None and slip_at is None and step >= planned and \
                    (slipped := _rejected_slip(env, action, slip_rng)):
                slip, slip_outcome = slipped
                turns.append([assistant_tool_message(slip.name, slip.arguments, f"call_{step}"),
                              {"role": "tool", "tool_call_id": f"call_{step}", "content": slip_outcome.result_text}])
                slip_at = len(turns) - 1
                step += 1
            outcome = env.run_action(action)
            call_id = f"call_{step}"
            turns.append([assistant_tool_message(action.name, action.arguments, call_id),
                          {"role": "tool", "tool_call_id": call_id, "content": outcome.result_text}])
            step += 1
            if step > horizon * 4 + 10:
                raise RuntimeError(f"oracle of {env_name} seed {env_seed} did not finish")
        final = [{"role": "assistant", "content": AGENT_FINAL_REPLY}]
        # cut the trajectory at a random point so that early, middle and final steps are all supervised; one with a
        # slip is cut after its recovery call, with the slip inside the kept turns
        oracle_turns = len(turns) - (slip_at is not None)
        end = rng.randint(1, oracle_turns + 1)  # drawn always: slips leave the main stream as it was
        if slip_at is not None:
            end = slip_rng.randint(slip_at + 2, min(len(turns) + 1, slip_at + max_turns))
        first = max(0, min(end, len(turns)) - max_turns)
        kept = turns[first:end]
        messages = head + [m for t in kept for m in t]
        if end > len(turns):
            messages += final
        # the last message must be the assistant's: drop a trailing tool result
        if messages[-1]["role"] == "tool":
            messages = messages[:-1]
        unsupervised = () if slip_at is None else (slip_at - first,)
        yield Conversation(messages=messages, tools=env.tools(), source=f"agent:{env_name}",
                           meta={"seed": env_seed, "horizon": horizon, **({"slip": slip_at} if unsupervised else {})},
                           unsupervised_turns=unsupervised)
        made += 1


def build_corpus(n_toolcall: int, n_agent: int, seed: int, group_size: int = 1, contrast_share: float = 0.0,
                 wide_small_talk: bool = False, rename_style: str = "variants",
                 agent_horizons: tuple[int, ...] = AGENT_HORIZONS,
                 agent_slip_share: float = 0.0) -> list[Conversation | ConversationGroup]:
    """The whole corpus, shuffled deterministically; with ``group_size`` > 1 the tool-call conversations
    come in groups that share everything but the final request (:func:`toolcall_groups`); with
    ``contrast_share`` > 0 some tool requests come with a contrast twin, and with ``wide_small_talk`` the
    small talk comes from more kinds (:func:`toolcall_conversations`); ``agent_horizons`` are the horizons the
    agent trajectories are drawn at (each is cut to its latest calls whatever its horizon), and
    ``agent_slip_share`` the share of them that shows a refused slip and its recovery (:func:`agent_conversations`)."""
    if group_size > 1 and (contrast_share or wide_small_talk):
        raise ValueError("contrast twins and wide small talk are made for single requests, "
                         "not for shared-prefix groups")
    calls: Iterator[Conversation | ConversationGroup] = (
        toolcall_groups(n_toolcall, seed, group_size, rename_style) if group_size > 1
        else toolcall_conversations(n_toolcall, seed, contrast_share, wide_small_talk, rename_style))
    convs = list(calls) + list(agent_conversations(n_agent, seed + 1, horizons=agent_horizons,
                                                          slip_share=agent_slip_share))
    random.Random(seed + 2).shuffle(convs)
    return convs


def dump_jsonl(convs: list[Conversation | ConversationGroup], path: str) -> None:
    """Write the corpus (for inspection and reproducibility checks); a group is written member by member."""
    with open(path, "w") as f:
        for item in convs:
            for c in item.members if isinstance(item, ConversationGroup) else [item]:
                record = {"source": c.source, "messages": c.messages, "tools": c.tools, "meta": c.meta}
                f.write(json.dumps(record) + "\n")

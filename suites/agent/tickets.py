"""Support-ticket queue: fetch each ticket, route it to its team, tag urgent ones, close it.

Minimum solution: a normal ticket costs 3 calls (fetch_next, assign, close), an urgent one 4 (plus tag). Ticket
contents are only revealed by ``fetch_next``, so no call can be skipped. Every result says how many tickets are
left, so a model that only sees its last few turns still knows whether to continue.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from suites.agent.base import Action, Counter, Environment, Rejected, Tool, obj_schema, split_horizon

TEAMS = ["billing", "tech", "sales", "shipping"]
TEXTS = {
    "billing": ["card charged twice", "refund not received", "wrong invoice total", "cannot update card"],
    "tech": ["app crashes on login", "password reset fails", "page will not load", "sync error 502"],
    "sales": ["price for 40 seats", "want a demo", "upgrade plan question", "discount for schools"],
    "shipping": ["parcel not arrived", "wrong address on label", "box was damaged", "tracking not updating"],
}


@dataclass
class Ticket:
    id: str
    topic: str
    urgent: bool
    text: str
    fetched: bool = False
    team: str | None = None
    tags: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    closed: bool = False
    resolution: str | None = None


class TicketQueueEnv(Environment):
    name = "tickets"
    min_horizon = 6

    def setup(self) -> None:
        normal, urgent = split_horizon(self.horizon, 3, 4, 0, self.rng)
        flags = [False] * normal + [True] * urgent
        self.rng.shuffle(flags)
        ids = Counter()
        self.tickets: list[Ticket] = []
        for is_urgent in flags:
            topic = self.rng.choice(TEAMS)
            self.tickets.append(Ticket(ids.make(self.rng, "T-"), topic, is_urgent, self.rng.choice(TEXTS[topic])))
        self.cursor = 0  # next ticket fetch_next returns

    # ---- helpers ---------------------------------------------------------------------------------
    def _left(self) -> int:
        return len(self.tickets) - self.cursor

    def _get(self, ticket_id: str) -> Ticket:
        for t in self.tickets:
            if t.id == ticket_id and t.fetched:
                return t
        raise Rejected(f"no fetched ticket {ticket_id}. Use fetch_next to get tickets.")

    def _open(self, ticket_id: str) -> Ticket:
        t = self._get(ticket_id)
        if t.closed:
            raise Rejected(f"ticket {ticket_id} is already closed.")
        return t

    def _describe(self, t: Ticket) -> str:
        urgent = "yes" if t.urgent else "no"
        return f'ticket {t.id} topic={t.topic} urgent={urgent} text="{t.text}"'

    # ---- tools -------------------------------------------------------------------------------------
    def _fetch_next(self, args: dict[str, Any]) -> str:
        if self.cursor >= len(self.tickets):
            return "queue is empty: all tickets fetched."
        t = self.tickets[self.cursor]
        self.cursor += 1
        t.fetched = True
        return f"{self._describe(t)}. {self._left()} more in queue."

    def _get_ticket(self, args: dict[str, Any]) -> str:
        t = self._get(args["ticket_id"])
        state = "closed" if t.closed else "open"
        tags = ",".join(t.tags) or "none"
        return f"{self._describe(t)} team={t.team or 'none'} tags={tags} status={state}."

    def _assign(self, args: dict[str, Any]) -> str:
        t = self._open(args["ticket_id"])
        t.team = args["team"]
        return f"assigned {t.id} to {t.team}."

    def _tag(self, args: dict[str, Any]) -> str:
        t = self._open(args["ticket_id"])
        if args["tag"] not in t.tags:
            t.tags.append(args["tag"])
        return f"tagged {t.id} {args['tag']}."

    def _reply(self, args: dict[str, Any]) -> str:
        t = self._open(args["ticket_id"])
        t.replies.append(args["message"])
        return f"replied to {t.id}."

    def _close(self, args: dict[str, Any]) -> str:
        t = self._open(args["ticket_id"])
        t.closed = True
        t.resolution = args["resolution"]
        left = self._left()
        if left == 0 and all(x.closed for x in self.tickets):
            return f"closed {t.id}. queue is empty: all tickets done."
        return f"closed {t.id}. {left} tickets left in queue."

    def _queue_size(self, args: dict[str, Any]) -> str:
        return f"{self._left()} tickets in queue."

    def _build_tools(self) -> list[Tool]:
        tid = {"type": "string", "description": "ticket id, e.g. T-1234"}
        return [
            Tool("fetch_next", "Take the next ticket from the queue and show it.", obj_schema({}), self._fetch_next),
            Tool("get_ticket", "Show a fetched ticket.", obj_schema({"ticket_id": tid}), self._get_ticket),
            Tool(
                "assign",
                "Assign a ticket to a team.",
                obj_schema({"ticket_id": tid, "team": {"type": "string", "enum": TEAMS + ["oncall"]}}),
                self._assign,
            ),
            Tool(
                "tag",
                "Add a tag to a ticket.",
                obj_schema({"ticket_id": tid, "tag": {"type": "string", "minLength": 1}}),
                self._tag,
            ),
            Tool(
                "reply",
                "Send a reply to the customer.",
                obj_schema({"ticket_id": tid, "message": {"type": "string", "minLength": 1}}),
                self._reply,
            ),
            Tool(
                "close",
                "Close a ticket.",
                obj_schema({"ticket_id": tid,
                            "resolution": {"type": "string", "enum": ["solved", "duplicate", "spam"]}}),
                self._close,
            ),
            Tool("queue_size", "How many tickets are still in the queue.", obj_schema({}), self._queue_size),
        ]

    # ---- task --------------------------------------------------------------------------------------
    def goal(self) -> str:
        return (
            f"Process all {len(self.tickets)} tickets in the support queue. For each ticket: call fetch_next, "
            "assign the ticket to the team named by its topic, and if it is urgent add the tag urgent, "
            "then close it with resolution solved. Stop when the queue is empty."
        )

    def check(self) -> bool:
        return all(
            t.closed
            and t.resolution == "solved"
            and t.team == t.topic
            and (("urgent" in t.tags) == t.urgent)
            for t in self.tickets
        )

    def next_action(self) -> Action | None:
        for t in self.tickets:
            if not t.fetched:
                return Action("fetch_next", {})
            if t.closed:
                continue
            if t.team != t.topic:
                return Action("assign", {"ticket_id": t.id, "team": t.topic})
            if t.urgent and "urgent" not in t.tags:
                return Action("tag", {"ticket_id": t.id, "tag": "urgent"})
            return Action("close", {"ticket_id": t.id, "resolution": "solved"})
        return None

    def state(self) -> dict[str, Any]:
        return {"cursor": self.cursor, "tickets": [asdict(t) for t in self.tickets]}

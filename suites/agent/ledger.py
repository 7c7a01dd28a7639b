"""Ledger: post every pending journal entry, then reconcile.

Entries are revealed one at a time by ``next_entry``. A deposit or withdrawal is one ``post``; a payment is one
``transfer``; a split payment is two transfers (one per payee). So an entry costs 2 or 3 calls, plus a single final
``reconcile``. Results repeat the entry id and the count still pending, so only recent turns are needed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from suites.agent.base import Action, Counter, Environment, Rejected, Tool, obj_schema, split_horizon

ACCOUNTS = ["cash", "bank", "rent", "food", "travel", "tax", "savings"]


@dataclass
class Leg:
    """One required movement: ``post`` when ``source`` is None, else ``transfer``."""

    account: str
    amount: int
    source: str | None = None


@dataclass
class Entry:
    id: str
    legs: list[Leg]
    revealed: bool = False
    done: list[bool] = field(default_factory=list)

    def text(self) -> str:
        if self.legs[0].source is None:
            leg = self.legs[0]
            verb = (f"deposit {leg.amount} into {leg.account}" if leg.amount > 0
                    else f"withdraw {-leg.amount} from {leg.account}")
            return f"entry {self.id}: {verb} (use post)"
        parts = [f"{leg.amount} to {leg.account}" for leg in self.legs]
        return f"entry {self.id}: pay from {self.legs[0].source}: " + " and ".join(parts) + " (one transfer each)"


class LedgerEnv(Environment):
    name = "ledger"
    min_horizon = 6

    def setup(self) -> None:
        simple, split = split_horizon(self.horizon, 2, 3, 1, self.rng)
        kinds = ["simple"] * simple + ["split"] * split
        self.rng.shuffle(kinds)
        ids = Counter()
        self.balances = {a: self.rng.randrange(50, 500) * 10 for a in ACCOUNTS}
        self.entries: list[Entry] = []
        for kind in kinds:
            if kind == "split":
                src = self.rng.choice(["cash", "bank"])
                payees = self.rng.sample([a for a in ACCOUNTS if a not in ("cash", "bank")], 2)
                legs = [Leg(p, self.rng.randrange(1, 30) * 5, src) for p in payees]
            elif self.rng.random() < 0.5:
                legs = [Leg(self.rng.choice(ACCOUNTS), self.rng.choice([1, -1]) * self.rng.randrange(1, 40) * 5)]
            else:
                src = self.rng.choice(["cash", "bank", "savings"])
                dst = self.rng.choice([a for a in ACCOUNTS if a != src])
                legs = [Leg(dst, self.rng.randrange(1, 40) * 5, src)]
            self.entries.append(Entry(ids.make(self.rng, "E-"), legs, done=[False] * len(legs)))
        self.expected = dict(self.balances)
        for e in self.entries:
            for leg in e.legs:
                self.expected[leg.account] += leg.amount
                if leg.source is not None:
                    self.expected[leg.source] -= leg.amount
        self.cursor = 0
        self.reconciled = False

    # ---- helpers ---------------------------------------------------------------------------------
    def _pending(self) -> int:
        return sum(1 for e in self.entries if not all(e.done))

    def _entry(self, entry_id: str) -> Entry:
        for e in self.entries:
            if e.id == entry_id and e.revealed:
                return e
        raise Rejected(f"no revealed entry {entry_id}. Use next_entry.")

    def _apply(self, entry_id: str, leg_match: Leg) -> str:
        e = self._entry(entry_id)
        for i, leg in enumerate(e.legs):
            if not e.done[i] and leg == leg_match:
                e.done[i] = True
                self.balances[leg.account] += leg.amount
                if leg.source is not None:
                    self.balances[leg.source] -= leg.amount
                break
        else:
            raise Rejected(f"that does not match any open part of entry {entry_id}: {e.text()}.")
        self.reconciled = False
        if not all(e.done):
            return f"recorded part of {e.id}. {sum(not d for d in e.done)} part left for this entry."
        left = self._pending()
        unrevealed = len(self.entries) - self.cursor
        if unrevealed == 0 and left == 0:
            return f"entry {e.id} posted. no entries left: call reconcile."
        return f"entry {e.id} posted. {unrevealed} entries left."

    # ---- tools -------------------------------------------------------------------------------------
    def _next_entry(self, args: dict[str, Any]) -> str:
        if self.cursor >= len(self.entries):
            return "no entries left: call reconcile."
        e = self.entries[self.cursor]
        self.cursor += 1
        e.revealed = True
        return f"{e.text()}. {len(self.entries) - self.cursor} more after this."

    def _post(self, args: dict[str, Any]) -> str:
        return self._apply(args["entry_id"], Leg(args["account"], args["amount"]))

    def _transfer(self, args: dict[str, Any]) -> str:
        if args["from_account"] == args["to_account"]:
            raise Rejected("from_account and to_account must differ.")
        return self._apply(args["entry_id"], Leg(args["to_account"], args["amount"], args["from_account"]))

    def _balance(self, args: dict[str, Any]) -> str:
        return f"{args['account']} balance {self.balances[args['account']]}."

    def _list_accounts(self, args: dict[str, Any]) -> str:
        return "accounts: " + ", ".join(f"{a}={b}" for a, b in self.balances.items()) + "."

    def _reconcile(self, args: dict[str, Any]) -> str:
        pending = self._pending() + (len(self.entries) - self.cursor)
        if pending:
            raise Rejected(f"{self._pending()} entries not fully posted; cannot reconcile.")
        if self.balances != self.expected:
            wrong = [a for a in ACCOUNTS if self.balances[a] != self.expected[a]]
            raise Rejected("balances do not match the journal: " + ", ".join(wrong) + ".")
        self.reconciled = True
        return "reconciled: all balances match. done."

    def _build_tools(self) -> list[Tool]:
        eid = {"type": "string", "description": "entry id, e.g. E-1234"}
        acct = {"type": "string", "enum": ACCOUNTS}
        return [
            Tool("next_entry", "Show the next pending journal entry.", obj_schema({}), self._next_entry),
            Tool(
                "post",
                "Add amount to one account (negative to withdraw).",
                obj_schema({"entry_id": eid, "account": acct, "amount": {"type": "integer"}}),
                self._post,
            ),
            Tool(
                "transfer",
                "Move a positive amount from one account to another.",
                obj_schema(
                    {"entry_id": eid, "from_account": acct, "to_account": acct,
                     "amount": {"type": "integer", "minimum": 1}}
                ),
                self._transfer,
            ),
            Tool("balance", "Show one account's balance.", obj_schema({"account": acct}), self._balance),
            Tool("list_accounts", "Show all balances.", obj_schema({}), self._list_accounts),
            Tool("reconcile", "Check the ledger against the journal once all entries are posted.", obj_schema({}),
                 self._reconcile),
        ]

    # ---- task --------------------------------------------------------------------------------------
    def goal(self) -> str:
        return (
            f"Post all {len(self.entries)} pending journal entries. Call next_entry to see each one, then record it "
            "exactly as it says: post for deposits and withdrawals, one transfer per payee for payments. "
            "When no entries are left, call reconcile."
        )

    def check(self) -> bool:
        return self.reconciled and self.balances == self.expected and all(all(e.done) for e in self.entries)

    def next_action(self) -> Action | None:
        for e in self.entries:
            if not e.revealed:
                return Action("next_entry", {})
            for i, leg in enumerate(e.legs):
                if e.done[i]:
                    continue
                if leg.source is None:
                    return Action("post", {"entry_id": e.id, "account": leg.account, "amount": leg.amount})
                return Action(
                    "transfer",
                    {"entry_id": e.id, "from_account": leg.source, "to_account": leg.account, "amount": leg.amount},
                )
        if not self.reconciled:
            return Action("reconcile", {})
        return None

    def state(self) -> dict[str, Any]:
        return {
            "balances": self.balances,
            "expected": self.expected,
            "cursor": self.cursor,
            "reconciled": self.reconciled,
            "entries": [asdict(e) for e in self.entries],
        }

"""Notes / key-value store: follow a chain of notes, collect words on the way, save the final code.

Every note in the chain names the next key, so the chain can only be walked with one ``get`` per note; a note
that says ``collect WORD`` costs one more call (``append``); the end note's code is saved with one ``put``. The
store is padded with look-alike decoy notes so that listing keys does not shortcut the walk.
"""

from __future__ import annotations

from typing import Any

from suites.agent.base import Action, Counter, Environment, Rejected, Tool, obj_schema, split_horizon

WORDS = ["amber", "birch", "coral", "dune", "elm", "flint", "garnet", "hazel", "ivy", "jade", "kelp", "lotus", "moss"]


class NotesEnv(Environment):
    name = "notes"
    min_horizon = 3

    def setup(self) -> None:
        plain, collect = split_horizon(self.horizon, 1, 2, 1, self.rng)
        kinds = [False] * plain + [True] * collect
        self.rng.shuffle(kinds)
        ids = Counter()
        self.chain = [ids.make(self.rng, "n-") for _ in kinds]
        self.words: list[str] = []
        self.store: dict[str, str] = {}
        self.code = str(self.rng.randrange(1000, 10000))
        for i, (key, is_collect) in enumerate(zip(self.chain, kinds)):
            nxt = f"next: {self.chain[i + 1]}" if i + 1 < len(self.chain) else f"end. code: {self.code}"
            if is_collect:
                word = self.rng.choice(WORDS)
                self.words.append(word)
                self.store[key] = f"collect {word}. {nxt}"
            else:
                self.store[key] = nxt
        for _ in range(max(4, len(self.chain) // 2)):  # decoys: same format, never reached from the start key
            decoy = ids.make(self.rng, "n-")
            self.store[decoy] = f"next: {ids.make(self.rng, 'n-')}"
        self.seen: set[str] = set()

    # ---- tools -------------------------------------------------------------------------------------
    def _get(self, args: dict[str, Any]) -> str:
        key = args["key"]
        if key not in self.store:
            raise Rejected(f"no key {key}.")
        self.seen.add(key)
        return f"{key} = {self.store[key]}"

    def _put(self, args: dict[str, Any]) -> str:
        self.store[args["key"]] = args["value"]
        return f"saved {args['key']}."

    def _append(self, args: dict[str, Any]) -> str:
        key, value = args["key"], args["value"]
        current = self.store.get(key, "")
        self.store[key] = f"{current},{value}" if current else value
        return f"{key} = {self.store[key]}"

    def _delete(self, args: dict[str, Any]) -> str:
        if args["key"] not in self.store:
            raise Rejected(f"no key {args['key']}.")
        del self.store[args["key"]]
        return f"deleted {args['key']}."

    def _list_keys(self, args: dict[str, Any]) -> str:
        keys = sorted(k for k in self.store if k.startswith(args["prefix"]))
        more = f" and {len(keys) - 10} more" if len(keys) > 10 else ""
        return f"{len(keys)} keys: " + (", ".join(keys[:10]) or "none") + more + "."

    def _build_tools(self) -> list[Tool]:
        key = {"type": "string", "minLength": 1}
        return [
            Tool("get", "Read the note stored under a key.", obj_schema({"key": key}), self._get),
            Tool("put", "Store a value under a key (overwrites).",
                 obj_schema({"key": key, "value": {"type": "string"}}), self._put),
            Tool(
                "append",
                "Append a value to a comma-separated list under a key.",
                obj_schema({"key": key, "value": {"type": "string", "minLength": 1}}),
                self._append,
            ),
            Tool("delete", "Delete a key.", obj_schema({"key": key}), self._delete),
            Tool("list_keys", "List keys that start with a prefix.", obj_schema({"prefix": {"type": "string"}}),
                 self._list_keys),
        ]

    # ---- task --------------------------------------------------------------------------------------
    def goal(self) -> str:
        return (
            f"Follow the chain of {len(self.chain)} notes starting at key {self.chain[0]}: get each note; it names "
            "the next key. When a note says collect WORD, append WORD to key collected. When a note says end, "
            "put its code under key answer."
        )

    def check(self) -> bool:
        return self.store.get("answer") == self.code and self.store.get("collected", "") == ",".join(self.words)

    def next_action(self) -> Action | None:
        done_words = self.store.get("collected", "")
        n_done = len(done_words.split(",")) if done_words else 0
        collected = 0
        for key in self.chain:
            if key not in self.seen:
                return Action("get", {"key": key})
            note = self.store.get(key, "")
            if note.startswith("collect "):
                collected += 1
                if collected > n_done:
                    return Action("append", {"key": "collected", "value": note.split()[1].rstrip(".")})
        if self.store.get("answer") != self.code:
            return Action("put", {"key": "answer", "value": self.code})
        return None

    def state(self) -> dict[str, Any]:
        return {"chain": self.chain, "store": self.store, "words": self.words, "code": self.code,
                "seen": sorted(self.seen)}

"""File system: sort every file in /inbox into the folder its first line names.

A file whose folder exists costs 2 calls (read_file, move_file); one whose folder must be created costs 3
(plus make_dir). ``search`` matches file *names* only, so destinations can only be learnt by reading. Each move
result names the next file still in /inbox, so a model that sees only recent turns can carry on.
"""

from __future__ import annotations

import posixpath
from typing import Any

from suites.agent.base import Action, Environment, Rejected, Tool, obj_schema, split_horizon

EXISTING = ["/docs", "/photos", "/music", "/work/reports", "/work/invoices", "/archive"]
WORDS = ["alpha", "brook", "cedar", "delta", "ember", "fjord", "grove", "harbor", "iris", "juniper", "kite", "lumen"]


def _norm(path: str) -> str:
    """Absolute, normalised path (a relative path is taken from /; '//x' is folded to '/x')."""
    return "/" + posixpath.normpath("/" + path.strip()).lstrip("/")


class FileSystemEnv(Environment):
    name = "files"
    min_horizon = 4

    def setup(self) -> None:
        plain, new_dir = split_horizon(self.horizon, 2, 3, 0, self.rng)
        self.dirs: set[str] = {"/", "/inbox", "/work"} | set(EXISTING)
        self.files: dict[str, str] = {"/docs/readme.txt": "dest: /docs\nHow to use this disk."}
        kinds = [False] * plain + [True] * new_dir
        self.rng.shuffle(kinds)
        self.targets: dict[str, str] = {}  # original inbox path -> required final path
        self.contents: dict[str, str] = {}
        made: set[str] = set()
        for i, needs_dir in enumerate(kinds):
            name = f"{self.rng.choice(WORDS)}-{i:03d}.txt"
            if needs_dir:
                while True:
                    folder = f"/projects/{self.rng.choice(WORDS)}{self.rng.randrange(100, 1000)}"
                    if folder not in made:
                        made.add(folder)
                        break
            else:
                folder = self.rng.choice(EXISTING)
            body = f"dest: {folder}\nnote {self.rng.randrange(1000, 10000)} about {self.rng.choice(WORDS)}."
            path = f"/inbox/{name}"
            self.files[path] = body
            self.contents[path] = body
            self.targets[path] = f"{folder}/{name}"
        self.read: set[str] = set()

    # ---- helpers ---------------------------------------------------------------------------------
    def _inbox(self) -> list[str]:
        return sorted(p for p in self.files if posixpath.dirname(p) == "/inbox")

    def _children(self, folder: str) -> list[str]:
        names = {posixpath.basename(p) for p in self.files if posixpath.dirname(p) == folder}
        names |= {posixpath.basename(d) + "/" for d in self.dirs if d != "/" and posixpath.dirname(d) == folder}
        return sorted(names)

    # ---- tools -------------------------------------------------------------------------------------
    def _list_dir(self, args: dict[str, Any]) -> str:
        folder = _norm(args["path"])
        if folder not in self.dirs:
            raise Rejected(f"no such folder {folder}.")
        names = self._children(folder)
        shown = ", ".join(names[:8]) or "(empty)"
        more = f" and {len(names) - 8} more" if len(names) > 8 else ""
        return f"{folder}: {shown}{more}."

    def _read_file(self, args: dict[str, Any]) -> str:
        path = _norm(args["path"])
        if path not in self.files:
            raise Rejected(f"no such file {path}.")
        self.read.add(path)
        return f"{path}:\n{self.files[path]}"

    def _write_file(self, args: dict[str, Any]) -> str:
        path = _norm(args["path"])
        if posixpath.dirname(path) not in self.dirs:
            raise Rejected(f"no such folder {posixpath.dirname(path)}.")
        self.files[path] = args["content"]
        return f"wrote {path}."

    def _make_dir(self, args: dict[str, Any]) -> str:
        folder = _norm(args["path"])
        if folder in self.dirs:
            return f"{folder} already exists."
        parent = posixpath.dirname(folder)
        while parent not in self.dirs:  # like mkdir -p
            self.dirs.add(parent)
            parent = posixpath.dirname(parent)
        self.dirs.add(folder)
        return f"created {folder}."

    def _move_file(self, args: dict[str, Any]) -> str:
        src, dst = _norm(args["src"]), _norm(args["dst"])
        if src not in self.files:
            raise Rejected(f"no such file {src}.")
        if dst in self.dirs:
            dst = posixpath.join(dst, posixpath.basename(src))
        if posixpath.dirname(dst) not in self.dirs:
            raise Rejected(f"no such folder {posixpath.dirname(dst)}: create it with make_dir first.")
        if dst in self.files:
            raise Rejected(f"{dst} already exists.")
        self.files[dst] = self.files.pop(src)
        inbox = self._inbox()
        if not inbox:
            return f"moved {src} to {dst}. /inbox is empty: all files sorted."
        return f"moved {src} to {dst}. {len(inbox)} files left in /inbox; next: {inbox[0]}"

    def _delete_file(self, args: dict[str, Any]) -> str:
        path = _norm(args["path"])
        if path not in self.files:
            raise Rejected(f"no such file {path}.")
        del self.files[path]
        return f"deleted {path}."

    def _search(self, args: dict[str, Any]) -> str:
        needle = args["name"].lower()
        hits = sorted(p for p in self.files if needle in posixpath.basename(p).lower())
        return "matches: " + (", ".join(hits[:8]) or "none") + (f" and {len(hits) - 8} more"
                                                                if len(hits) > 8 else "") + "."

    def _build_tools(self) -> list[Tool]:
        path = {"type": "string", "minLength": 1}
        return [
            Tool("list_dir", "List a folder (first 8 names).", obj_schema({"path": path}), self._list_dir),
            Tool("read_file", "Show a file's content.", obj_schema({"path": path}), self._read_file),
            Tool("write_file", "Create or overwrite a file.",
                 obj_schema({"path": path, "content": {"type": "string"}}), self._write_file),
            Tool(
                "move_file",
                "Move a file. dst is a folder (keeps the name) or a full new path.",
                obj_schema({"src": path, "dst": path}),
                self._move_file,
            ),
            Tool("make_dir", "Create a folder.", obj_schema({"path": path}), self._make_dir),
            Tool("delete_file", "Delete a file.", obj_schema({"path": path}), self._delete_file),
            Tool("search", "Find files whose name contains a text.", obj_schema({"name": path}), self._search),
        ]

    # ---- task --------------------------------------------------------------------------------------
    def goal(self) -> str:
        first = self._inbox()[0] if self._inbox() else "/inbox"
        return (
            f"Sort the {len(self.targets)} files in /inbox. Read each file: its first line says dest: FOLDER. "
            "Move the file into that folder, keeping its name. If the folder does not exist, create it with "
            f"make_dir first. Start with {first}; each move tells you the next file."
        )

    def check(self) -> bool:
        return not self._inbox() and all(self.files.get(t) == self.contents[s] for s, t in self.targets.items())

    def next_action(self) -> Action | None:
        for src in self._inbox():
            if src not in self.targets:
                continue  # a file the agent wrote into /inbox: not part of the task
            if src not in self.read:
                return Action("read_file", {"path": src})
            folder = posixpath.dirname(self.targets[src])
            if folder not in self.dirs:
                return Action("make_dir", {"path": folder})
            return Action("move_file", {"src": src, "dst": folder})
        return None

    def state(self) -> dict[str, Any]:
        return {"dirs": sorted(self.dirs), "files": self.files, "targets": self.targets, "read": sorted(self.read)}

"""Cache suite data: sessions of turns whose prompts grow (turn t's conversation extends turn t-1's)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifier.records import SuiteManifest
from verifier.run.summary import InputProblem


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str
    assistant: str


class Session(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    group: str = "growing"
    system: str | None = None
    turns: list[Turn] = Field(min_length=2)
    max_tokens: int = Field(default=4, ge=1, le=256)

    def messages(self, t: int) -> list[dict[str, str]]:
        """The conversation sent at turn ``t``: earlier turns with the suite's fixed assistant replies."""
        msgs: list[dict[str, str]] = [{"role": "system", "content": self.system}] if self.system else []
        for prev in self.turns[:t]:
            msgs += [{"role": "user", "content": prev.user}, {"role": "assistant", "content": prev.assistant}]
        msgs.append({"role": "user", "content": self.turns[t].user})
        return msgs


@dataclass
class LoadedCacheSuite:
    manifest: SuiteManifest
    cases: list[Session]
    problems: list[InputProblem] = field(default_factory=list)
    tokenizer_dir: str | None = None  # --option tokenizer=DIR: count prompts locally (token accounting)


def load_sessions(path: Path, *, strict: bool = False) -> tuple[list[Session], list[InputProblem]]:
    if not path.is_file():
        raise FileNotFoundError(f"cache suite {path}: no such file")
    out: list[Session] = []
    problems: list[InputProblem] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Session.model_validate(json.loads(line)))
            continue
        except json.JSONDecodeError as e:
            msg = f"not JSON ({e.msg})"
        except ValidationError as e:
            err = e.errors()[0]
            msg = f"{'.'.join(str(x) for x in err['loc']) or 'session'}: {err['msg']}"
        if strict:
            raise ValueError(f"{path}:{n}: {msg}")
        problems.append(InputProblem(source=str(path), line=n, message=msg))
    return out, problems

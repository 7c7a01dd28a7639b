"""Engine counters, exposed on /metrics in the Prometheus text format."""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields


@dataclass
class EngineMetrics:
    requests: int = 0
    requests_finished: int = 0
    requests_rejected_queue_full: int = 0      # 429
    requests_rejected_timeout: int = 0         # 503
    requests_aborted: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_cached_tokens: int = 0
    preemptions: int = 0
    steps: int = 0
    kv_tag_checks: int = 0                     # (sequence, step) page-table verifications
    kv_tag_failures: int = 0                   # requests aborted with kv_integrity_error
    kv_faults_injected: int = 0                # test-only fault injections applied

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, **deltas: int) -> None:
        with self._lock:
            for k, v in deltas.items():
                setattr(self, k, getattr(self, k) + v)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self)}

    def prometheus(self, gauges: dict[str, float]) -> str:
        lines = []
        for name, value in self.snapshot().items():
            lines.append(f"# TYPE reference_engine_{name}_total counter")
            lines.append(f"reference_engine_{name}_total {value}")
        for name, gauge in gauges.items():
            lines.append(f"# TYPE reference_engine_{name} gauge")
            lines.append(f"reference_engine_{name} {gauge}")
        return "\n".join(lines) + "\n"

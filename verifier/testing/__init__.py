"""Test helpers that are real parts, not mocks: a scripted OpenAI-compatible HTTP server on loopback.

Kept inside the package (not under ``tests/``) because the benchmark and other engineers' tests use it too.
"""

from verifier.testing.responders import FaultInjector, schema_responder
from verifier.testing.scripted_server import Reply, RequestContext, ScriptedServer

__all__ = ["FaultInjector", "Reply", "RequestContext", "ScriptedServer", "schema_responder"]

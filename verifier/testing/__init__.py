"""Test helpers that are real parts, not mocks: a scripted OpenAI-compatible HTTP server on loopback.

Kept inside the package (not under ``tests/``) because the benchmark and other engineers' tests use it too.
"""

from verifier.testing.scripted_server import FaultInjector, Reply, RequestContext, ScriptedServer, schema_responder

__all__ = ["FaultInjector", "Reply", "RequestContext", "ScriptedServer", "schema_responder"]

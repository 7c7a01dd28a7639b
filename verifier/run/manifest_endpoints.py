"""The endpoints as ``manifest.json`` keeps them, and the endpoint set ``--resume`` rebuilds from them.

Why apart from the runner: both directions must agree on what is a secret (header values, URL userinfo are never
stored), and keeping them side by side makes that visible.
"""

from __future__ import annotations

from verifier.http.endpoints import EndpointSet
from verifier.http.redaction import URL_USERINFO_MASK, is_secret_header, redact_url
from verifier.records import EndpointConfig
from verifier.run.errors import InputError
from verifier.run.store import ManifestEndpoint, RunManifest

REDACTED = "<redacted>"


def manifest_endpoints(eps: EndpointSet) -> list[ManifestEndpoint]:
    out = []
    for e in eps.endpoints:
        spec = eps.builtin(e.name)
        headers = {k: (REDACTED if is_secret_header(k) else v) for k, v in e.headers.items()}
        out.append(ManifestEndpoint(  # URL userinfo is a secret too: redacted, and --resume asks for --config
            name=e.name, source=redact_url(eps.sources.get(e.name, e.base_url)) or "",
            base_url=redact_url(e.base_url) or "", model=e.model,
            api_key_env=e.api_key_env, headers=headers, extra_body=e.extra_body, rate=e.rate,
            concurrency=e.concurrency, timeout=e.timeout, connect_timeout=e.connect_timeout,
            write_timeout=e.write_timeout, read_timeout=e.read_timeout, max_response_bytes=e.max_response_bytes,
            stream=e.stream, max_attempts=e.max_attempts, is_reference=e.name == eps.reference,
            builtin=spec.as_dict() if spec else None, price=e.price, budget=e.budget, claims=e.claims))
    return out


def endpoints_from_manifest(m: RunManifest, override: EndpointSet | None) -> EndpointSet:
    """Rebuild the endpoint set for ``--resume``; secret headers must come back from the same ``--config``."""
    if override is not None:
        names = {e.name for e in m.endpoints}
        if {e.name for e in override.endpoints} != names:
            raise InputError(f"--resume: the endpoints given ({sorted(e.name for e in override.endpoints)}) "
                             f"differ from the run's ({sorted(names)})")
        override.reference = m.reference
        override.endpoints.sort(key=lambda c: c.name != m.reference)
        return override
    configs, sources = [], {}
    for me in m.endpoints:
        if REDACTED in me.headers.values() or URL_USERINFO_MASK in me.base_url:
            raise InputError(f"--resume: endpoint '{me.name}' used secret headers or URL credentials that are not "
                             f"stored; "
                             "pass the same --config again")
        base = me.source if me.source.startswith("builtin:") else me.base_url
        configs.append(EndpointConfig(name=me.name, base_url=base, model=me.model, api_key_env=me.api_key_env,
                                      headers=me.headers, extra_body=me.extra_body, rate=me.rate,
                                      concurrency=me.concurrency, timeout=me.timeout,
                                      connect_timeout=me.connect_timeout, write_timeout=me.write_timeout,
                                      read_timeout=me.read_timeout, max_response_bytes=me.max_response_bytes,
                                      stream=me.stream, max_attempts=me.max_attempts, price=me.price,
                                      budget=me.budget, claims=me.claims))
        sources[me.name] = me.source
    configs.sort(key=lambda c: c.name != m.reference)
    return EndpointSet(configs, m.reference, sources)

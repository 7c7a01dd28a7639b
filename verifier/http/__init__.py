"""Talking to endpoints: endpoint configuration, the HTTP client (retries, deadlines, size cap, SSE reassembly),
reply parsing and secret redaction."""

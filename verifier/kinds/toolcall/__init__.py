"""The ``toolcall`` kind: one OpenAI request per JSONL line, scored against the reference (K2VV and BFCL rules)."""

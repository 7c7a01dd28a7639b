"""The ``cache`` kind: multi-turn sessions with growing prefixes; prompt-cache hit rates against the cacheable bound."""

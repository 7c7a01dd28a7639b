"""Running suites: the protocol kinds implement, loading, the runner, the run folder (store, manifest, summary),
shards and their merge, verdicts. Imports kinds, http and stats; never the CLI, the reports or the history database."""

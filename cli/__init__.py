"""What users run (through the Makefile): pre-flight checks, connect to a node, the deploy guard and diff, the stack
graph and the synth summary. Each is `python -m cli.<command> --help`; each says in one line why it cannot do its job
and exits non-zero. Maintainer tools live in tools/, and nothing at synth time imports either."""

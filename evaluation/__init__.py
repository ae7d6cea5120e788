"""Evaluations of a candidate model: past runs replayed with their recorded lookups, compared.

`services` creates an evaluation and runs its cases, `replay` gives a case its model and
the recorded results, `tasks` runs a case on a worker. It may import the engine and
everything below it; the staff surfaces start evaluations and show them.
"""

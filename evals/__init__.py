"""Held-out sets and scorers: what "better" means for a deployment (scheduled evaluation, and canaries).

`evals.registry` names every kind of set (`<kind>-<name>`) and how it loads: `personalization` (generated word
problems and grading tasks, scored by the rule scorer: `evals.personalization`), `user` (a user's own JSONL file:
`evals.user_sets`) and `episodes` (a general-agent setting's held-out tasks, run as episodes: `evals.episodes`,
whose splits the environments own). Nothing here starts a service: a set is plain data and plain functions.
"""

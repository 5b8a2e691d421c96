"""The messages of the system: every activity, workflow, signal, update and query input and output,
the error types, and each activity's name and options.

Pydantic and the standard library only, so workflows, the API, activities and
entry points can all speak it without pulling in torch, Redis or HTTP clients.
"""

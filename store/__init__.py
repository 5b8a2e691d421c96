"""The store floor: every record the system keeps in Redis, as one typed model with its reads and writes.

Only this package (and the code that starts servers: stack.services, stack.store_replication) talks to Redis.
Everything above it speaks the models here: `store.client.Store` holds one connection and a repository per kind
of record (`store.keys` names the keys and their TTLs). Workflows carry references (key names built by
`store.keys`), never the data. Store failures come out as `store.errors.StoreError`s, never as redis-py exceptions.
"""

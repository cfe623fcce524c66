"""`memorag serve`: an HTTP API over named corpora saved in one folder, sharing one set of models.

Modules: `store` (the corpora and the shared models), `worker` (one thread for all model
work), `app` (the Starlette routes, JSON errors, server-sent events), `command` (the
`memorag serve` command). Needs the `[serve]` extra (starlette, uvicorn).
"""

"""`memorag serve`: an HTTP API over named corpora saved in one folder, sharing one set of models.

Modules: `store` (the corpora and the shared models), `worker` (the jobs that do the model
work, cancelled at safe points), `turns` (whose turn it is at the models and at a corpus),
`batching` (the jobs' greedy decodings stepped together as one batch), `guard` (Host, Origin, API key, content type and
body size, before any route), `limits` (what one request may ask), `bodies` (request
bodies checked before any model work), `responses` (error replies without internals), `uploads` (uploaded files read off the event loop),
`app` (the Starlette routes, server-sent events), `command` (the `memorag serve`
command); for the evidence inspector, `inspector` (the page at `/`, from `static/`),
`sources` (the page or section around a passage), `originals` (the uploaded PDFs kept)
and `pages` (a PDF page as a PNG, the passage marked). Needs the `[serve]` extra
(starlette, uvicorn).
"""

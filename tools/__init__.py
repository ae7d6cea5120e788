"""The read-only tools the agent may use, one module each, and the fixed table they are dispatched through.

A tool's module (`search_docs`, `read_job_status`, `read_service_status`) holds its argument
schema, policy, database and HTTP backends, staff view and re-check comparer, and builds one
`base.Tool`; `registry.TOOLS` lists them. Shared pieces: `base` (what a tool is made of),
`lookups` (results and errors), `compare` (re-check outcomes), `httpbackends` (the bounded GET
the HTTP backends share), `dispatch` (one call). Tools read tickets (`tickets`) and the shared
kit; they never import the engine, the providers or the staff surfaces.
"""

"""The read-only tools the agent may use, and the fixed table they are dispatched through.

`registry.TOOLS` names each tool with its argument schema, policy and backends; `dispatch`
runs one call; `httpbackends` reads the operator's own job and status services; `compare`
says whether a cited item changed when it is read again. Tools read tickets (`tickets`) and
the shared kit; they never import the engine, the providers or the staff surfaces.
"""

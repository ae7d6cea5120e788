"""The engine: a run from start to packet, owned by the application.

The loop (`loop`) drives a run step by step (`steps`, `settling`): it reserves a model request
or a dispatch before it starts, decides on what the model proposed (`decisions`, pure), keeps
the budgets (`budgets`, pure) and the deadline, and writes the review packet (`packets`). The
watchdog (`watchdog`) ends what is overdue or lost; `tasks` hand runs to workers; `services` are
the entry points that staff surfaces call. Every runs-side table is here (`models`, Django app
label `agentrun`), the few hand-written statements are in `sql`, and the read side (`selectors`,
`timeline`, `headlines`, `packetview`: one packet as every surface shows it) is what staff pages,
the API and the help desk show. It imports tools,
providers, tickets and the kit; what lies above it hears from it through `signals` and the
`loop.RUN_IO` registry.
"""

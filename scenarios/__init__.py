"""Conformance scenarios (CONFORMANCE §7) and everything only they use.

    format   the scenario file, checked as it is read (Scenario, ScenarioError)
    runner   a scenario's run set up (clock rewound, counters resumed) and driven, here or on the workers
    harness  the wrappers of production objects: FaultyDispatcher, the probed model, scenario_io
    probe    Redis counters of the model requests and dispatches that really happened
    judge    a report compared with a scenario's `expect` (the conformance checker's comparison)

Production modules never import this package: `apps` registers the scenario's wrappers in
`engine.loop.RUN_IO`, and the harness is imported with the first run whose record carries a
scenario's script. This module imports nothing.
"""

"""Conformance scenarios (CONFORMANCE §7) and everything only they use.

    format   the scenario file, checked as it is read (Scenario, ScenarioError)
    runner   a scenario's run set up (clock rewound, counters resumed) and driven, here or on the workers
    harness  the wrappers of production objects: FaultyDispatcher, the probed model, scenario_io
    probe    Redis counters of the model requests and dispatches that really happened
    judge    a report compared with a scenario's `expect` (the conformance checker's comparison)

Production modules do not import this package, with one exception: agentrun.loop.run_io
imports `harness.scenario_io`, inside the function, for a run whose record carries a
scenario's script. This module imports nothing, so that import loads no runner (and no loop).
"""

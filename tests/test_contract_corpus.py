"""The contract's cases beyond the published scenarios.

`tests/scenarios/*.json` are scenario files in the format of CONFORMANCE §7,
each with the `expect` the contract's text gives: the order of exits, budgets
and reservations at their edges, exact prices, call ids and receipts, argument
normalization, the tools' authorization, evidence reuse, drafts and packets.
Each runs through `run_scenario`'s path and is judged by the project's port of
the conformance checker's comparison (`scenarios.judge`), so the
corpus needs nothing beside the repository; CI runs the published checker too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios.format import Scenario
from scenarios.judge import scenario_judge
from scenarios.runner import run_scenario

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "tests" / "scenarios").glob("*.json"))


def test_the_corpus_is_there():
    assert len(CORPUS) >= 250


@pytest.mark.parametrize("path", CORPUS, ids=lambda path: path.stem)
def test_scenario_ends_as_the_contract_says(demo_committed, settle, path):
    scenario = Scenario.parse(path.read_text())
    assert scenario.expect, "a corpus scenario says what it expects"
    report = json.loads(json.dumps(run_scenario(scenario)))  # as run_scenario prints it
    assert scenario_judge(scenario.expect, report) == [], report

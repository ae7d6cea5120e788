"""The contract's cases beyond the published scenarios.

`tests/scenarios/*.json` are scenario files in the format of CONFORMANCE §7,
each with the `expect` the contract's text gives: the order of exits, budgets
and reservations at their edges, exact prices, call ids and receipts, argument
normalization, the tools' authorization, evidence reuse, drafts and packets.
Each runs through `run_scenario`'s path and is judged by the conformance
checker's own comparison (`../shared/tools/check_scenarios.py`).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from agentrun.scenarios.format import Scenario
from agentrun.scenarios.runner import run_scenario

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "tests" / "scenarios").glob("*.json"))
CHECKER = ROOT.parent / "shared" / "tools" / "check_scenarios.py"


@pytest.fixture(scope="module")
def checker():
    spec = importlib.util.spec_from_file_location("check_scenarios", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_corpus_is_there():
    assert len(CORPUS) >= 250


@pytest.mark.parametrize("path", CORPUS, ids=lambda path: path.stem)
def test_scenario_ends_as_the_contract_says(demo_committed, settle, checker, path):
    scenario = Scenario.parse(path.read_text())
    assert scenario.expect, "a corpus scenario says what it expects"
    report = json.loads(json.dumps(run_scenario(scenario)))  # as run_scenario prints it
    assert checker.compare(scenario.expect, report) == [], report

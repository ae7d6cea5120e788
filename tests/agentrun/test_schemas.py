"""Normalizing and validating tool arguments (CONFORMANCE §3, §4). Pure: no database."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decisions import Call, NormalizedCall, normalize_call
from engine.statuses import Detail, Status, Stop
from tickets.demo import SERVICES as DEMO_SERVICES
from tools.base import Catalog, call_key, canonical_json
from tools.registry import TOOLS

DEMO = Catalog.of(name for name, *_ in DEMO_SERVICES)  # what the database backend lists for the demo
# A status page's components and groups (tests/fixtures/statuspage_summary.json names the same).
PAGE = Catalog.of(["API Endpoints", "API (US)", "API (EU)", "Management Portal", "Git Operations"])


def listing(catalog):
    return {"read_service_status": catalog}.get


def normalized(tool, args, catalog=DEMO):
    result = normalize_call(Call(tool, args), listing(catalog))
    assert isinstance(result, NormalizedCall), result
    return result.args


def bad_arguments(tool, args, catalog=DEMO) -> str | None:
    """The validation error's text when the call is refused as bad arguments, else None."""
    result = normalize_call(Call(tool, args), listing(catalog))
    if isinstance(result, Stop) and (result.status, result.detail) == (
        Status.INVALID_OR_FORBIDDEN,
        Detail.BAD_ARGUMENTS,
    ):
        return result.note
    return None


def is_bad_arguments(tool, args, catalog=DEMO) -> bool:
    return bad_arguments(tool, args, catalog) is not None


@pytest.mark.parametrize(
    "tool, args, expected",
    [
        ("search_docs", {"query": "export"}, {"query": "export", "max_results": 3}),
        ("search_docs", {"query": "  CSV   Export\t\nFails  "}, {"query": "csv export fails", "max_results": 3}),
        ("search_docs", {"query": "EXPORT_ROLE_REQUIRED"}, {"query": "export_role_required", "max_results": 3}),
        ("search_docs", {"query": "Straße"}, {"query": "strasse", "max_results": 3}),  # casefold, not lower
        ("search_docs", {"query": "x\u3000\u00a0y"}, {"query": "x y", "max_results": 3}),  # unicode whitespace
        ("search_docs", {"query": "x", "max_results": 1}, {"query": "x", "max_results": 1}),
        ("search_docs", {"query": "x", "max_results": 5}, {"query": "x", "max_results": 5}),
        ("search_docs", {"query": "x", "max_results": 6}, {"query": "x", "max_results": 5}),
        ("search_docs", {"query": "x", "max_results": 10**30}, {"query": "x", "max_results": 5}),
        ("read_job_status", {"job_id": "J-42"}, {"job_id": "J-42"}),
        ("read_job_status", {"job_id": "  j-42 "}, {"job_id": "J-42"}),
        ("read_job_status", {"job_id": "J-123456789012"}, {"job_id": "J-123456789012"}),
        ("read_job_status", {"job_id": "J-0"}, {"job_id": "J-0"}),
        ("read_service_status", {"service": "export"}, {"service": "export"}),
        ("read_service_status", {"service": " EXPORT "}, {"service": "export"}),
        ("read_service_status", {"service": "Billing"}, {"service": "billing"}),
    ],
)
def test_arguments_are_normalized_then_validated(tool, args, expected):
    assert normalized(tool, args) == expected


@pytest.mark.parametrize(
    "tool, args",
    [
        # strict types
        ("search_docs", {"query": "x", "max_results": True}),
        ("search_docs", {"query": "x", "max_results": False}),
        ("search_docs", {"query": "x", "max_results": 3.0}),
        ("search_docs", {"query": "x", "max_results": "3"}),
        ("search_docs", {"query": "x", "max_results": None}),
        ("search_docs", {"query": "x", "max_results": [3]}),
        ("search_docs", {"query": 42}),
        ("search_docs", {"query": None}),
        ("search_docs", {"query": ["export"]}),
        ("read_job_status", {"job_id": 42}),
        ("read_service_status", {"service": 1}),
        # ranges
        ("search_docs", {"query": "x", "max_results": 0}),
        ("search_docs", {"query": "x", "max_results": -1}),
        ("search_docs", {"query": ""}),
        ("search_docs", {"query": "   \t\n "}),  # blank once trimmed
        ("search_docs", {"query": "a" * 201}),
        # missing and unknown names
        ("search_docs", {}),
        ("search_docs", {"max_results": 3}),
        ("search_docs", {"query": "x", "limit": 3}),
        ("search_docs", {"query": "x", "Max_Results": 3}),
        ("read_job_status", {}),
        ("read_job_status", {"job_id": "J-42", "account": "GLOBEX"}),
        ("read_service_status", {"service": "export", "verbose": True}),
        ("read_service_status", {}),
        # job id pattern
        ("read_job_status", {"job_id": "42"}),
        ("read_job_status", {"job_id": "J-"}),
        ("read_job_status", {"job_id": "J42"}),
        ("read_job_status", {"job_id": "J-1234567890123"}),
        ("read_job_status", {"job_id": "J-4 2"}),
        ("read_job_status", {"job_id": "J--42"}),
        ("read_job_status", {"job_id": "K-42"}),
        ("read_job_status", {"job_id": "J-42; drop table"}),
        ("read_job_status", {"job_id": "J-\u0664\u0662"}),  # Arabic-Indic digits
        ("read_job_status", {"job_id": "J-\uff14\uff12"}),  # fullwidth digits
        ("read_job_status", {"job_id": "J-\u0969"}),  # Devanagari digit
        ("read_job_status", {"job_id": "J-4\u00b2"}),  # superscript two
        # service names
        ("read_service_status", {"service": "exports"}),
        ("read_service_status", {"service": "status"}),
        ("read_service_status", {"service": ""}),
    ],
)
def test_bad_arguments_are_rejected(tool, args):
    assert is_bad_arguments(tool, args)


def test_query_of_exactly_200_characters_is_accepted():
    assert normalized("search_docs", {"query": "a" * 200})["query"] == "a" * 200


def test_query_length_is_measured_after_collapsing_whitespace():
    padded = "  " + "a" * 100 + "     " + "b" * 99 + "  "  # 208 written, 200 once normalized
    assert len(normalized("search_docs", {"query": padded})["query"]) == 200


def test_query_length_is_measured_after_casefolding():
    # 150 characters written, 300 once case-folded ("ß" -> "ss")
    assert is_bad_arguments("search_docs", {"query": "ß" * 150})
    assert normalized("search_docs", {"query": "ß" * 100})["query"] == "ss" * 100


def test_job_id_of_thirteen_digits_with_padding_is_still_too_long():
    assert is_bad_arguments("read_job_status", {"job_id": "  J-1234567890123  "})


def test_normalize_leaves_non_strings_for_validation():
    assert TOOLS["search_docs"].args.normalize({"query": " A  B ", "max_results": 3.0}) == {
        "query": "a b",
        "max_results": 3.0,
    }


def test_normalize_applies_case_rules_only_to_their_own_argument():
    assert TOOLS["read_job_status"].args.normalize({"job_id": "j-1", "note": " Keep  Case "}) == {
        "job_id": "J-1",
        "note": "Keep Case",
    }


def test_call_key_is_the_same_for_equivalent_calls():
    a = normalize_call(Call("search_docs", {"query": "  EXPORT  role", "max_results": 9}))
    b = normalize_call(Call("search_docs", {"max_results": 5, "query": "export role"}))
    assert a.key == b.key == call_key("search_docs", {"query": "export role", "max_results": 5})


def test_call_key_differs_by_tool_and_by_arguments():
    assert call_key("search_docs", {"query": "a"}) != call_key("search_docs", {"query": "b"})
    assert call_key("read_job_status", {"job_id": "J-1"}) != call_key("search_docs", {"job_id": "J-1"})


def test_canonical_json_is_key_order_independent_and_keeps_unicode():
    assert canonical_json({"b": 1, "a": "é"}) == canonical_json({"a": "é", "b": 1}) == '{"a":"é","b":1}'


# --- properties of normalization ---------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(query=st.text(max_size=260), max_results=st.integers(-3, 12))
def test_normalized_search_arguments_are_a_fixed_point(query, max_results):
    first = normalize_call(Call("search_docs", {"query": query, "max_results": max_results}))
    if isinstance(first, Stop):
        assert first.detail == Detail.BAD_ARGUMENTS
        return
    q = first.args["query"]
    assert 1 <= len(q) <= 200 and 1 <= first.args["max_results"] <= 5
    assert q == q.strip() and "  " not in q and q == q.casefold()
    again = normalize_call(Call("search_docs", first.args))
    assert isinstance(again, NormalizedCall) and again.key == first.key


@settings(max_examples=200, deadline=None)
@given(job_id=st.text(alphabet=st.sampled_from("jJ-0123456789 \t٤５"), max_size=18))
def test_a_normalized_job_id_is_ascii_j_dash_digits(job_id):
    result = normalize_call(Call("read_job_status", {"job_id": job_id}))
    if isinstance(result, NormalizedCall):
        value = result.args["job_id"]
        assert value.startswith("J-") and value[2:].isascii() and value[2:].isdigit() and len(value) <= 14


# --- the service argument: what the operator's source lists ----------------------------------------


@pytest.mark.parametrize(
    "written, normalized_as",
    [
        ("Management Portal", "management portal"),
        ("  MANAGEMENT   portal ", "management portal"),
        ("management-portal", "management-portal"),  # its slug
        ("API (US)", "api (us)"),
        ("api-us", "api-us"),
        ("API-US", "api-us"),
        ("api endpoints", "api endpoints"),  # a group
        ("API-ENDPOINTS", "api-endpoints"),
    ],
)
def test_a_service_is_named_by_name_or_slug_in_any_case(written, normalized_as):
    assert normalized("read_service_status", {"service": written}, PAGE) == {"service": normalized_as}
    assert PAGE.find(normalized_as) is not None


def test_the_catalog_finds_the_entry_a_value_names():
    assert PAGE.find("api-us") == PAGE.find("Api (us)") == "API (US)"
    assert PAGE.find("api endpoints") == PAGE.find("api-endpoints") == "API Endpoints"
    assert PAGE.find("api") is None and PAGE.find("portal") is None


def test_an_unknown_service_is_a_bad_argument_naming_the_services_listed():
    note = bad_arguments("read_service_status", {"service": "export"}, PAGE)
    assert note == (
        "service: Value error, no service named 'export' is listed; the services are: "
        "API Endpoints, API (US), API (EU), Management Portal, Git Operations"
    )
    assert "the services are: export, api, auth, billing" in bad_arguments("read_service_status", {"service": "x"})


def test_a_long_catalog_is_shown_capped():
    many = Catalog.of(f"Region {n}" for n in range(1, 121))
    note = bad_arguments("read_service_status", {"service": "region 0"}, many)
    assert "Region 50 (and 70 more)" in note and "Region 51" not in note


def test_without_a_catalog_any_one_line_name_of_the_right_length_passes():
    """The page could not be read: the lookup itself will say whether the service is listed."""
    assert normalized("read_service_status", {"service": "Anything At All"}, None) == {"service": "anything at all"}
    assert normalized("read_service_status", {"service": "x" * 100}, None) == {"service": "x" * 100}
    for refused in ("", "   ", "x" * 101, 5, None, ["api"]):
        assert is_bad_arguments("read_service_status", {"service": refused}, None), refused


def test_the_model_is_offered_the_names_listed():
    schema = TOOLS["read_service_status"].args.offered_schema(PAGE)["properties"]["service"]
    assert schema["enum"] == list(PAGE.names)
    many = Catalog.of(f"Region {n}" for n in range(1, 121))
    schema = TOOLS["read_service_status"].args.offered_schema(many)["properties"]["service"]
    assert "enum" not in schema and "Region 50 (and 70 more)" in schema["description"]
    assert "enum" not in TOOLS["read_service_status"].args.offered_schema(None)["properties"]["service"]

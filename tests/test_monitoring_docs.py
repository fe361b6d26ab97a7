"""The Grafana dashboard and the Prometheus alert rules in docs/ use only metrics that exist.

    every query         every PromQL expression of docs/grafana/*.json (each `expr`, and the queries of
                        its template variables) and of docs/prometheus/*.yml (each rule's `expr`) is read;
                        each metric name in it must be a series `server/metrics/` `DECLARED` exposes:
                        a counter as `<name>_total`, a histogram as `<name>_bucket` / `_sum` / `_count`, a
                        gauge as `<name>` — or one of Prometheus' own (`up`). Each label a selector matches
                        on must be one of that metric's labels (or `le` of a bucket, or the target labels
                        `job` / `instance`), and so must each label an aggregation groups by
    valid rules         the rules file has the shape Prometheus loads: groups with unique names, rules with
                        an `alert` (unique) and an `expr`, durations, string labels and annotations; and
                        docs/MONITORING.md names every alert
    the checker         the extraction itself: names, suffixes and labels it must find, and refuse

Nothing is listed by hand: a panel or rule added to those files is checked the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from server.metrics import DECLARED

DOCS = Path(__file__).resolve().parents[1] / "docs"
DASHBOARDS = sorted((DOCS / "grafana").glob("*.json"))
RULE_FILES = sorted((DOCS / "prometheus").glob("*.yml"))

PROMETHEUS_OWN = {"up": ()}
"""Series Prometheus writes itself for every target (no labels of their own beyond the target's)."""
TARGET_LABELS = {"job", "instance"}
KEYWORDS = {
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right",
    "inf", "nan",
    # aggregation operators, which may be written `sum by (x) (…)`, not followed by their parenthesis
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "limitk", "limit_ratio",
}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_SELECTOR = re.compile(r"(?<![\w:])([A-Za-z_:][\w:]*)?\s*\{([^{}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_NAME = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")
_VARIABLE_QUERY = re.compile(r"^\s*(?:label_values|query_result)\((.*?)(?:,\s*\w+)?\)\s*$", re.S)


@dataclass
class Parsed:
    """What one PromQL expression refers to."""

    names: set[str] = field(default_factory=set)
    matched: list[tuple[str, str]] = field(default_factory=list)  # (metric name, label matched on)
    grouped: set[str] = field(default_factory=set)  # labels of by (…), without (…), on (…), …


def parse(expr: str) -> Parsed:
    parsed = Parsed()
    text = _STRING.sub('""', expr)  # label values and regexes are not names
    for match in _SELECTOR.finditer(text):
        name, body = match.group(1), match.group(2)
        assert name, f"a selector without a metric name ({{__name__=…}}) is not checkable: {expr}"
        parsed.matched.extend((name, label) for label in _MATCHER.findall(body))
    text = _SELECTOR.sub(lambda m: m.group(1) or "", text)
    text = _RANGE.sub("", text)
    for labels in _GROUPING.findall(text):
        parsed.grouped |= {label.strip() for label in labels.split(",") if label.strip()}
    text = _GROUPING.sub(" ", text)
    parsed.names = {name for name in _NAME.findall(text) if name not in KEYWORDS}
    return parsed


def series_labels(name: str) -> tuple[str, ...] | None:
    """The labels of a series name as Prometheus stores it, or None when no declared metric exposes it."""
    if name in PROMETHEUS_OWN:
        return PROMETHEUS_OWN[name]
    kind, labels = DECLARED.get(name, ("", ()))
    if kind == "gauge":
        return labels
    if name.endswith("_total"):
        kind, labels = DECLARED.get(name.removesuffix("_total"), ("", ()))
        return labels if kind == "counter" else None
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            kind, labels = DECLARED.get(name.removesuffix(suffix), ("", ()))
            if kind == "histogram":
                return (*labels, "le") if suffix == "_bucket" else labels
    return None


def problems(expr: str) -> list[str]:
    """What is wrong with `expr`'s metric names and labels (empty: nothing)."""
    parsed = parse(expr)
    found: list[str] = []
    known: set[str] = set(TARGET_LABELS)
    for name in sorted(parsed.names):
        labels = series_labels(name)
        if labels is None:
            found.append(f"{name}: no declared metric exposes this series")
        else:
            known |= set(labels)
    for name, label in parsed.matched:
        labels = series_labels(name)
        if labels is not None and label not in (*labels, *TARGET_LABELS):
            found.append(f"{name}: has no label {label!r}")
    for label in sorted(parsed.grouped - known):
        found.append(f"grouped by {label!r}, a label of no metric in the expression")
    return found


# ---- collecting the expressions ------------------------------------------------------------------------

def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def dashboard_expressions(path: Path) -> list[str]:
    """Every `expr` anywhere in the dashboard (panels, rows' panels, …) and every template variable's
    query (`label_values(<selector>, label)`, `query_result(<expr>)`)."""
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    found = [value for key, value in _walk(dashboard) if key == "expr" and isinstance(value, str)]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        query = query.get("query", "") if isinstance(query, dict) else query
        inner = _VARIABLE_QUERY.match(query or "")
        assert inner, f"{path.name}: variable {variable.get('name')}: an uncheckable query {query!r}"
        found.append(inner.group(1))
    return found


def rule_expressions(path: Path) -> list[str]:
    rules = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def all_expressions() -> list[tuple[str, str]]:
    found = [(path.name, expr) for path in DASHBOARDS for expr in dashboard_expressions(path)]
    found += [(path.name, expr) for path in RULE_FILES for expr in rule_expressions(path)]
    return found


# ---- the files -----------------------------------------------------------------------------------------

def test_the_dashboard_and_rules_are_there() -> None:
    assert [p.name for p in DASHBOARDS] == ["tollway.json"]
    assert [p.name for p in RULE_FILES] == ["alerts.yml"]
    assert len(dashboard_expressions(DASHBOARDS[0])) >= 10


EXPRESSIONS = all_expressions()


@pytest.mark.parametrize(("source", "expr"), EXPRESSIONS,
                         ids=[f"{source}#{n}" for n, (source, _) in enumerate(EXPRESSIONS)])
def test_every_query_uses_declared_metrics_and_labels(source: str, expr: str) -> None:
    assert parse(expr).names, f"{source}: no metric in {expr!r}"
    assert problems(expr) == [], f"{source}: {expr}"


def test_the_dashboard_panels_have_titles_and_unique_ids() -> None:
    dashboard = json.loads(DASHBOARDS[0].read_text(encoding="utf-8"))
    panels = [value for key, value in _walk(dashboard) if key == "panels"]
    flat = [panel for group in panels for panel in group]
    ids = [panel["id"] for panel in flat]
    assert len(ids) == len(set(ids))
    assert all(panel.get("title") for panel in flat)
    assert dashboard["uid"] and dashboard["title"]


DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")
RULE_KEYS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}


def test_the_rules_file_is_what_prometheus_loads() -> None:
    rules = yaml.safe_load(RULE_FILES[0].read_text(encoding="utf-8"))
    assert set(rules) == {"groups"}
    groups = rules["groups"]
    assert [g["name"] for g in groups] and len({g["name"] for g in groups}) == len(groups)
    alerts: list[str] = []
    for group in groups:
        assert set(group) <= {"name", "interval", "rules", "limit"}, group.keys()
        assert group["rules"], group["name"]
        for rule in group["rules"]:
            assert set(rule) <= RULE_KEYS, rule
            assert ("alert" in rule) != ("record" in rule), rule
            assert isinstance(rule["expr"], str) and rule["expr"].strip(), rule
            for key in ("for", "keep_firing_for"):
                assert key not in rule or DURATION.match(str(rule[key])), rule
            for key in ("labels", "annotations"):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in rule.get(key, {}).items())
            if "alert" in rule:
                alerts.append(rule["alert"])
    assert len(alerts) == len(set(alerts))
    operations = (DOCS / "MONITORING.md").read_text(encoding="utf-8")
    assert [name for name in alerts if f"`{name}`" not in operations] == []


# ---- the checker itself --------------------------------------------------------------------------------

def test_the_checker_finds_names_labels_and_groupings() -> None:
    parsed = parse('histogram_quantile(0.99, sum by (le, route) ('
                   'rate(tollway_http_request_duration_seconds_bucket{job="$job",route=~"/api.*"}'
                   '[$__rate_interval]))) / on (job) group_left up offset 5m')
    assert parsed.names == {"tollway_http_request_duration_seconds_bucket", "up"}
    assert parsed.matched == [("tollway_http_request_duration_seconds_bucket", "job"),
                              ("tollway_http_request_duration_seconds_bucket", "route")]
    assert parsed.grouped == {"le", "route", "job"}
    assert parse('sum(rate(tollway_model_calls_total{outcome="a{b}"}[5m])) > 1e3').names == {
        "tollway_model_calls_total"}


@pytest.mark.parametrize(("expr", "wrong"), [
    ("rate(tollway_no_such_metric_total[5m])", "tollway_no_such_metric_total"),
    ("rate(tollway_http_requests[5m])", "tollway_http_requests"),  # a counter without _total
    ("tollway_http_request_duration_seconds", "tollway_http_request_duration_seconds"),  # a bare histogram
    ("tollway_quota_sync_backlog_total", "tollway_quota_sync_backlog_total"),  # a gauge with _total
    ("tollway_build_info_count", "tollway_build_info_count"),
    ('tollway_model_calls_total{outcom="success"}', "'outcom'"),
    ('tollway_http_requests_total{le="1"}', "'le'"),  # le belongs to a bucket only
    ("sum by (model) (rate(tollway_http_requests_total[5m]))", "'model'"),
    ("scrape_samples_scraped", "scrape_samples_scraped"),
])
def test_the_checker_refuses_what_does_not_exist(expr: str, wrong: str) -> None:
    found = problems(expr)
    assert found and any(wrong in problem for problem in found), found


def test_the_checker_accepts_every_exposed_series() -> None:
    for name, (kind, labels) in DECLARED.items():
        exposed = {"counter": [f"{name}_total"], "gauge": [name],
                   "histogram": [f"{name}_bucket", f"{name}_sum", f"{name}_count"]}[kind]
        for series in exposed:
            selector = ",".join(f'{label}="x"' for label in labels)
            assert problems(f"{series}{{{selector}}}") == [], series

"""deepgp's learning curves as ``benchmarks/time_to_quality.py`` records them, one JSON line per snapshot of one
training run: the run's ``key`` (:data:`KEY`) and the values at that snapshot (:data:`VALUES`), declared once
with the one check of a record against them (:func:`record_problem`) for both readers, the script (its table,
its resume) and the report (:mod:`deepgp_bench.compare`), each in its own words (:data:`SCRIPT`, :data:`REPORT`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace

from deepgp.datasets.uci import plain_name

ABSENT = object()  # the value of a field a record lacks
KEY_WHERE = "its key's "  # how a refusal names a field of a record's key


def number(value) -> bool:
    """Whether ``value`` is a finite JSON number (not NaN or an infinity, which JSON cannot hold; not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def dataset_name(dataset: str) -> bool:
    """Whether ``dataset`` is one ``--dataset`` of time_to_quality.py takes: a data set's plain name
    (:func:`deepgp.datasets.uci.plain_name`), ``letters`` or ``letters:N``."""
    name, colon, size = dataset.partition(":")
    if name == "letters" and colon:
        return size.isdigit() and size.isascii() and int(size) >= 2
    return plain_name(dataset)


@dataclass(frozen=True)
class Domain:
    """The values a field may hold: JSON of ``kind`` (int: a whole number; float: any finite number; str;
    dict: an object; never true or false), at least ``least`` where given, null too where ``null``, and
    of those of its kind only those ``test`` holds for, where given (``what`` names them)."""

    kind: type
    least: int | None = None
    null: bool = False
    test: Callable[[str], bool] | None = None
    what: str = ""

    def of_kind(self, value) -> bool:
        return number(value) if self.kind is float else isinstance(value, self.kind) and not isinstance(value, bool)

    def holds(self, value) -> bool:
        if value is None and self.null:
            return True
        return self.of_kind(value) and (self.least is None or value >= self.least) and (
            self.test is None or self.test(value))

    def or_null(self) -> Domain:
        return replace(self, null=True)


TEXT, OBJECT = Domain(str), Domain(dict)
COUNT, INDEX = Domain(int, least=1), Domain(int, least=0)
NUMBER, SECONDS = Domain(float), Domain(float, least=0)
DATASET = Domain(str, test=dataset_name, what="data set's name")

# a run's key (time_to_quality.py's run_key; a run of float64 products adds "products")
KEY = dict(system=TEXT, dataset=DATASET, model=TEXT, method=TEXT, split=INDEX, part=TEXT, recipe=TEXT, overrides=OBJECT,
           points=COUNT, draws=COUNT)
# a snapshot's values: the iterations trained, their wall-clock seconds, the KDE and the mixture estimate of the
# test log density per point, the RMSE and the bound per training point
VALUES = dict(iterations=COUNT, seconds=SECONDS, kde=NUMBER, mixture=NUMBER, rmse=SECONDS, bound=NUMBER)


# how a reader words a refusal: (where, a field's name, its value or ABSENT, its domain) → why, after where
Words = Callable[[str, str, object, Domain], str]


def json_line(line: bytes | str):
    """The JSON value on one line of a file, or :data:`ABSENT` where it is not JSON (a write cut short, not text)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # (a UnicodeDecodeError is a ValueError)
        return ABSENT


def shown(value, width: int = 60) -> str:
    """``value`` (as json.loads gives it) as its JSON text, cut to ``width`` characters."""
    text = json.dumps(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _report_field(where: str, name: str, value, domain: Domain) -> str:
    if value is ABSENT:
        return f"{where}no {name}"
    if domain.test is not None and domain.of_kind(value):
        return f"{where}{name} is {shown(value)}, not a {domain.what}"
    noun = {str: "a text", dict: "a JSON object", int: "an integer", float: "a finite number"}[domain.kind]
    return (f"{where}{name} is {shown(value)}, not {noun}{'' if domain.least is None else f' >= {domain.least}'}"
            f"{' or null' if domain.null else ''}")


def _script_field(where: str, name: str, value, domain: Domain) -> str:
    # a key's field is named by its JSON type (and its least, where the value is of that type), a value by its domain
    if name == "key" and not where:
        return "not a JSON object with a run's key"
    text = f"{where}{name} is {'absent' if value is ABSENT else shown(value, 40)}"
    if domain.test is not None and domain.of_kind(value):
        return f"{text}, no {domain.what}"
    key = where == KEY_WHERE
    noun = {str: "a string", dict: "a JSON object", int: "a whole number" if key else "a count",
            float: "a finite number"}[domain.kind]
    least = domain.least is not None and (not key or domain.of_kind(value))
    return f"{text}, not {noun}" + (f" of at least {domain.least}" if least else "")


REPORT: Words = _report_field  # deepgp_bench.compare's
SCRIPT: Words = _script_field  # time_to_quality.py's


def fields_problem(rec: dict, fields: dict[str, Domain], words: Words, where: str = "") -> str:
    """Why a field of ``fields`` ({name: domain}) of ``rec`` is absent or outside its domain, in ``words``, after
    ``where`` ("" where none is)."""
    for name, domain in fields.items():
        value = rec.get(name, ABSENT)
        if not domain.holds(value):
            return words(where, name, value, domain)
    return ""


def keyed_problem(rec, key: dict[str, Domain], values: dict[str, Domain], words: Words) -> str:
    """Why the JSON value ``rec`` is no JSON object whose ``key`` (an object) holds ``key``'s fields and which
    holds ``values``' fields, each in its domain (:func:`fields_problem`; "" where it is one)."""
    if not isinstance(rec, dict) or not isinstance(rec.get("key"), dict):  # (a key that is no object: none)
        return words("", "key", ABSENT, OBJECT)
    return fields_problem(rec["key"], key, words, KEY_WHERE) or fields_problem(rec, values, words)


def record_problem(rec, words: Words, values: Iterable[str] = tuple(VALUES), null: Collection[str] = ()) -> str:
    """Why the JSON value ``rec`` is no time_to_quality.py record, in ``words`` ("" where it is one): a key
    of :data:`KEY`'s fields and ``values`` (names in :data:`VALUES`, in the order checked), each in its
    domain; those named in ``null`` may be null as well (the report takes a KDE not recorded)."""
    return keyed_problem(rec, KEY, {n: VALUES[n].or_null() if n in null else VALUES[n] for n in values}, words)

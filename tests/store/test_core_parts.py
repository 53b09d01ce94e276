"""Issue 61.3: the core of zkstore in three parts, ordered by what they import.

``zkstore/zookeeper/`` (the session and what rides on it), ``zkstore/records/`` (the small JSON
records, their strict parser, the handle a record carries, one module per family of records)
and ``zkstore/payloads/`` (object storage and the stores of handles) replace a flat floor of 23
modules. The import graph gives them one order, payloads over records over zookeeper, over what
all three share (errors, config, signing, layout, protocol, closing): setup.cfg's layers
contract keeps it (``make lint``), and these tests keep the contract, the floor and the split
of the old ``zkstore/jobs/records.py`` from quietly coming undone.
"""

from __future__ import annotations

import configparser
import importlib
import importlib.util
import re

import grimp
import pytest

from tests.helpers import REPO
from zkstore.jobs.definition import JobDefinition
from zkstore.payloads.serializers import PickleSerializer
from zkstore.records.record import Record

pytestmark = pytest.mark.unit

#: The three parts, top first: each may import those after it, never one before.
PARTS = ("payloads", "records", "zookeeper")
#: What stays at the top of zkstore/, beneath the parts: every part uses some of it. config is
#: read by the ZooKeeper session and carries the signing key (so signing stays beside it).
SHARED = frozenset({"errors", "config", "signing", "layout", "protocol", "closing"})
#: Top-level modules of the layers above the parts (setup.cfg's store-layers contract).
ABOVE = frozenset({"conditions", "policy"})
#: Beside the parts, used by none: lifeline (children that die with their parent) serves the
#: daemon's archive maker and the dev servers of zkstore/dev; it is here, not in recovery,
#: because zkstore never imports recovery.
BESIDE = frozenset({"lifeline"})
#: The families of records that zkstore/jobs/records.py held, and what each holds.
FAMILIES = {
    "job_records": {
        "JobStatus",
        "RunningInfo",
        "Outcome",
        "CancelRequest",
        "SparkApp",
        "ControlObject",
    },
    "result_records": {"JobResult", "QuarantineEntry"},
    "fleet_records": {"MemberInfo", "Assignment", "LeaderInfo", "DrainMark"},
}


def test_the_top_of_zkstore_holds_only_what_the_parts_share() -> None:
    top = {p.stem for p in (REPO / "zkstore").glob("*.py") if p.stem != "__init__"}
    known = SHARED | ABOVE | BESIDE
    assert top == known, (
        f"zkstore/ holds {sorted(top - known)} beside what the three parts share: "
        f"put each in {', '.join(PARTS)} (by what it imports) or say in this test why not; "
        f"gone: {sorted(known - top)}"
    )
    for part in PARTS:
        assert (REPO / "zkstore" / part / "__init__.py").is_file(), part


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("zkstore")


@pytest.mark.parametrize(
    ("lower", "upper"),
    [(PARTS[i], PARTS[j]) for i in range(len(PARTS)) for j in range(i)],
)
def test_a_part_never_reaches_a_part_above_it(
    graph: grimp.ImportGraph, lower: str, upper: str
) -> None:
    importer, imported = f"zkstore.{lower}", f"zkstore.{upper}"
    assert importer in graph.modules and imported in graph.modules
    chains = graph.find_shortest_chains(importer=importer, imported=imported, as_packages=True)
    assert not chains, f"{importer} reaches {imported}: " + "; ".join(
        " -> ".join(chain) for chain in sorted(chains)
    )


@pytest.mark.parametrize("shared", sorted(SHARED))
def test_what_the_parts_share_imports_none_of_them(graph: grimp.ImportGraph, shared: str) -> None:
    for part in PARTS:
        chains = graph.find_shortest_chains(
            importer=f"zkstore.{shared}", imported=f"zkstore.{part}", as_packages=True
        )
        assert not chains, f"zkstore.{shared} reaches zkstore.{part}: {sorted(chains)}"


def test_the_layers_contract_orders_the_parts_as_the_graph_does() -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO / "setup.cfg")
    contract = next(
        parser[s]
        for s in parser.sections()
        if s.startswith("importlinter:contract:")
        and parser[s].get("type") == "layers"
        and parser[s].get("containers", "").strip() == "zkstore"
    )
    layers = [
        {name.strip() for name in re.split(r"[:|]", line)}
        for line in contract["layers"].strip().splitlines()
    ]
    where = {name: at for at, layer in enumerate(layers) for name in layer}
    assert [where[p] for p in PARTS] == sorted(where[p] for p in PARTS), layers
    assert len({where[p] for p in PARTS}) == len(PARTS), "each part is a layer of its own"
    assert all(where[s] > where[PARTS[-1]] for s in SHARED), "what they share is beneath them"
    assert contract.getboolean("exhaustive"), "a new top-level module must find its layer"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_of_records_has_its_module(family: str) -> None:
    module = importlib.import_module(f"zkstore.records.{family}")
    records = {
        name
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, Record)
        and value.__module__ == module.__name__
    }
    assert records == FAMILIES[family]
    assert set(FAMILIES[family]) <= set(module.__all__)


def test_the_job_records_module_is_gone() -> None:
    # Nothing stored or documented names it: a definition names zkstore.jobs.definition only,
    # records are JSON. One module name with three meanings (issue 61.2) is one fewer.
    assert importlib.util.find_spec("zkstore.jobs.records") is None


def test_a_stored_definition_names_no_module_but_its_own() -> None:
    """Nothing stored changes: a definition, with every option that reaches its pickle, names
    zkstore.jobs.definition and no module that moved."""
    definition = JobDefinition.for_script(
        "core-parts",
        "print('hi')",
        filename="job.py",
        args=["a"],
        require={"zone": "a"},
        spark_conf={"spark.ui.enabled": "false"},
    )
    payload = PickleSerializer[JobDefinition]().dumps(definition)
    named = {name.decode() for name in re.findall(rb"\bzkstore(?:\.\w+)+", payload)}
    assert named == {"zkstore.jobs.definition"}

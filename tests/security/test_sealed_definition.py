"""A definition read sealed (issue 43 item 4): every field as it was written, and nothing of a
forged pickle ever runs, whatever it names or calls."""

from __future__ import annotations

import io
import os
import pickle
import pickletools
from pathlib import Path
from typing import Any

import pytest

from zkstore.errors import ConfigError, IncompatiblePayload
from zkstore.jobs import definition as definition_module
from zkstore.jobs.definition import JobDefinition, ShippedFile
from zkstore.jobs.sealed import DefinitionSerializer, open_sealed
from zkstore.payloads.serializers import PICKLE_MAGIC, PickleSerializer

pytestmark = pytest.mark.unit


def add(ctx: Any, a: int, b: int) -> int:
    return a + b


def _body(data: bytes) -> bytes:
    return PickleSerializer.body(data)


def _payload(body: bytes) -> bytes:
    """``body`` behind the header a writer of this Python puts in front."""
    good = PickleSerializer().dumps(JobDefinition.for_script("x", "pass", filename="x.py"))
    return good[: len(good) - len(_body(good))] + body


def test_a_function_definition_reads_back_whole_with_its_code_still_bytes() -> None:
    written = JobDefinition.for_function(
        "job-1",
        add,
        args=(1, 2),
        files=(ShippedFile("m.zip", "modules", b"PK\x05\x06" + b"\0" * 18),),
        spark_conf={"spark.executor.memory": "1g"},
        require={"gpu": "a"},
        lifecycle={"timeout": 60, "notify": "https://example.com/hook"},
        max_attempts=5,
    )
    read = DefinitionSerializer().loads(DefinitionSerializer().dumps(written))
    assert read == written
    assert isinstance(read.code, bytes) and read.code == written.code
    assert read.load_function()[1] == (1, 2)  # the driver's unpickling of the code: unchanged


def test_a_script_definition_reads_back_whole() -> None:
    written = JobDefinition.for_script(
        "s-1", "import sys\nprint(sys.argv)\n", filename="/a/etl.py", args=["2026-01-01"]
    )
    assert DefinitionSerializer().loads(DefinitionSerializer().dumps(written)) == written


class _Planted:
    """What a job's code could write as its own definition: unpickling it creates a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("where", ["top", "field", "file", "args"])
def test_a_forged_definition_is_refused_and_nothing_of_it_runs(tmp_path: Path, where: str) -> None:
    marker = tmp_path / "ran"
    planted = _Planted(marker)
    legit = JobDefinition.for_script("j", "pass", filename="j.py")
    if where == "top":
        body = pickle.dumps(planted)
    else:
        state = dict(legit.__dict__)
        if where == "field":
            state["spark_conf"] = {"spark.x": planted}
        elif where == "file":
            state["files"] = (planted,)
        else:
            state["args"] = (planted,)
        forged = object.__new__(JobDefinition)
        forged.__dict__.update(state)
        body = pickle.dumps(forged)
    with pytest.raises(IncompatiblePayload):
        DefinitionSerializer().loads(_payload(body))
    assert not marker.exists(), "the forged pickle's call ran"


def test_a_pickle_that_changes_the_definition_class_changes_only_a_stand_in() -> None:
    """BUILD on a class sets its attributes: the class named is a stand-in of that read."""
    body = (  # the class; (None, {"summary": "owned"}); BUILD: setattr(class, "summary", ...)
        b"\x80\x04\x8c\x17zkstore.jobs.definition\x8c\rJobDefinition\x93"
        b"N}\x8c\x07summary\x8c\x05owneds\x86b."
    )
    pickletools.dis(body, out=io.StringIO())  # a well-formed pickle
    with pytest.raises(IncompatiblePayload):
        open_sealed(body)
    assert callable(definition_module.JobDefinition.summary), "the real class is untouched"


def test_a_pickle_naming_any_other_global_is_refused(tmp_path: Path) -> None:
    body = pickle.dumps(os.getcwd)
    with pytest.raises(IncompatiblePayload, match=r"names no posix\.getcwd"):
        open_sealed(body)


def test_garbage_is_refused_as_not_a_definition() -> None:
    for body in (b"", b"\x80\x04N.", b"\x80\x04K\x01.", pickle.dumps({"job_id": "x"})[:-3]):
        with pytest.raises(IncompatiblePayload):
            open_sealed(body)
    with pytest.raises(IncompatiblePayload, match="not a zkstore pickle"):
        DefinitionSerializer().loads(b"no header at all")
    assert PICKLE_MAGIC  # the header every definition carries


def test_a_function_jobs_arguments_travel_apart_from_its_code_or_with_it() -> None:
    """Fleet protocol 2: two pickles (new code can take the arguments over as bytes); before,
    one pickle of (function, args), which every release reads."""
    apart = JobDefinition.for_function("j", add, args=(1, 2))
    assert apart.arguments is not None and pickle.loads(apart.arguments) == (1, 2)
    assert apart.load_function()[1] == (1, 2)
    together = JobDefinition.for_function("j", add, args=(1, 2), apart=False)
    assert together.arguments is None and pickle.loads(together.code or b"")[1] == (1, 2)
    assert together.load_function()[1] == (1, 2)


def test_new_code_takes_a_jobs_arguments_over_as_bytes() -> None:
    old = JobDefinition.for_function("j", add, args=(40, 2))

    def renamed(ctx: Any, a: int, b: int) -> int:
        return a * b

    new = JobDefinition.for_function("j", renamed, args=("ignored",), kept=old)
    assert new.arguments == old.arguments and new.args_shown == old.args_shown
    function, args = new.load_function()
    assert args == (40, 2) and function(None, *args) == 80
    legacy = JobDefinition.for_function("j", add, args=(1,), apart=False)
    with pytest.raises(ConfigError, match="give them again after --"):
        JobDefinition.for_function("j", renamed, kept=legacy)

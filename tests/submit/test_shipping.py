"""What a job takes along, piece by piece: option parsers, local module discovery, the argument
check, and the attempt's working directory. No servers: these are pure functions over files."""

from __future__ import annotations

import ast
import random
import re
import sys
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from recovery.cli.control_commands import parse_control_values
from recovery.client.modules import MODULES_ZIP, local_imports, modules_zip
from recovery.client.spark_dependencies import Dependencies, check_arguments, prepare
from recovery.driver.workdir import lay_out
from recovery.shared.sparkconf import merge_lists, parse_spark_conf
from zkstore.config import parse_storage_options
from zkstore.errors import ConfigError, IncompatiblePayload
from zkstore.jobs.definition import JobDefinition, ShippedFile
from zkstore.service.job_view import headline

pytestmark = pytest.mark.unit


def test_spark_conf_is_flat_strings_split_at_the_first_equals() -> None:
    conf = parse_spark_conf(
        [
            "spark.sql.shuffle.partitions=3",
            "spark.executor.memory=1g",
            "spark.driver.extraJavaOptions=-Da=b -Dc=d",
            "spark.dynamicAllocation.enabled=true",
            "spark.some.empty=",
        ]
    )
    assert conf == {
        "spark.sql.shuffle.partitions": "3",
        "spark.executor.memory": "1g",
        "spark.driver.extraJavaOptions": "-Da=b -Dc=d",
        "spark.dynamicAllocation.enabled": "true",
        "spark.some.empty": "",
    }
    assert parse_spark_conf(["spark.a=1", "spark.a=2"]) == {"spark.a": "2"}, "last one wins"


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("novalue", "--conf 'novalue' is not KEY=VALUE"),
        ("=1", "--conf '=1' is not KEY=VALUE"),
        ("sql.shuffle.partitions=3", "'sql.shuffle.partitions' is not a Spark property"),
        ("spark.=3", "'spark.' is not a Spark property"),
        ("spark.a b=3", "the key contains white space"),
    ],
)
def test_bad_spark_conf_names_the_option(pair: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_spark_conf([pair])


def test_control_values_are_flat_with_json_scalars() -> None:
    values = parse_control_values(
        ["a.b.c=1", "rate=2.5", "on=true", "off=false", "none=null", 'quoted="7"', "text=hi there"]
    )
    assert values == {
        "a.b.c": 1,
        "rate": 2.5,
        "on": True,
        "off": False,
        "none": None,
        "quoted": "7",
        "text": "hi there",
    }
    assert parse_control_values(["x=NaN", "y=Infinity"]) == {"x": "NaN", "y": "Infinity"}
    with pytest.raises(ConfigError, match="a JSON array is not a scalar"):
        parse_control_values(["xs=[1,2]"])
    with pytest.raises(ConfigError, match="control value 'x' is not KEY=VALUE"):
        parse_control_values(["x"])


def test_storage_options_keep_their_own_parser_and_name_their_option() -> None:
    assert parse_storage_options(["config_kwargs.s3.addressing_style=path", "anon=true"]) == {
        "config_kwargs": {"s3": {"addressing_style": "path"}},
        "anon": True,
    }
    with pytest.raises(ConfigError, match="--storage-option 'anon' is not KEY=VALUE"):
        parse_storage_options(["anon"])


def test_list_valued_spark_properties_are_merged_not_overwritten() -> None:
    conf = {"spark.jars": "hdfs:///libs/a.jar", "spark.app.name": "x"}
    merged = merge_lists(conf, {"spark.jars": ["/w/b.jar"], "spark.files": []})
    assert merged == {"spark.jars": "/w/b.jar,hdfs:///libs/a.jar", "spark.app.name": "x"}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_module_is_parsed_once_per_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program submitting many jobs from one file parses it once; an edit is parsed again,
    even one that keeps its size and lands within the file system's timestamp granularity,
    and what it imports now is followed."""
    write(tmp_path, {"job.py": "import aa\n", "aa.py": "", "bb.py": ""})
    parsed: list[str] = []
    real = ast.parse

    def counting(source: Any, filename: str = "<unknown>", **kwargs: Any) -> Any:
        parsed.append(Path(filename).name)
        return real(source, filename, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    job = tmp_path / "job.py"
    for _ in range(3):
        assert sorted(local_imports(job)) == ["aa"]
    assert parsed == ["job.py", "aa.py"], parsed
    job.write_text("import bb\n")
    assert sorted(local_imports(job)) == ["bb"]
    assert parsed[2:] == ["job.py", "bb.py"], parsed


def test_local_imports_follow_the_job_into_its_directory_only(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "job.py": "import os, helpers\nfrom pkg.sub import f\n\ndef run(ctx):\n"
            "    import late\n    from . import nothing\n",
            "helpers.py": "import chained\n",
            "chained.py": "X = 1\n",
            "late.py": "",
            "pkg/__init__.py": "",
            "pkg/sub.py": "from .other import g\n",
            "pkg/other.py": "",
            "pkg/data.json": "{}",
            "pkg/__pycache__/sub.cpython-311.pyc": "",
            "unrelated.py": "",
            "notes/readme.txt": "",
        },
    )
    found = local_imports(tmp_path / "job.py")
    assert sorted(found) == ["chained", "helpers", "late", "pkg"]
    shipped = modules_zip(tmp_path / "job.py")
    assert shipped is not None and shipped.name == MODULES_ZIP and shipped.role == "modules"
    with zipfile.ZipFile(BytesIO(shipped.data)) as archive:
        assert sorted(archive.namelist()) == [
            "chained.py",
            "helpers.py",
            "late.py",
            "pkg/__init__.py",
            "pkg/data.json",
            "pkg/other.py",
            "pkg/sub.py",
        ]
    again = modules_zip(tmp_path / "job.py")
    assert again is not None and again.data == shipped.data, "the same sources zip the same"


def test_a_job_importing_nothing_local_ships_no_zip(tmp_path: Path) -> None:
    write(tmp_path, {"job.py": "import json\nimport pyspark\n", "json.txt": ""})
    assert modules_zip(tmp_path / "job.py") is None


def test_modules_over_the_limit_are_a_clear_error(tmp_path: Path) -> None:
    write(tmp_path, {"job.py": "import big\n"})
    (tmp_path / "big.py").write_bytes(random.Random(0).randbytes(1_000_000))  # incompressible
    with pytest.raises(ConfigError, match=r"imports from its directory \(big.py\) come to more"):
        modules_zip(tmp_path / "job.py", limit=100_000)


def test_prepare_reads_local_files_and_passes_uris_and_packages_to_spark(tmp_path: Path) -> None:
    write(tmp_path, {"job.py": "import helpers\n", "helpers.py": "", "deps.zip": "", "a.csv": ""})
    (tmp_path / "lib.jar").write_bytes(b"PK")
    shipment = prepare(
        tmp_path / "job.py",
        Dependencies(
            py_files=[f"{tmp_path}/deps.zip,s3a://bucket/remote.zip"],
            files=[f"file://{tmp_path}/a.csv"],
            jars=[str(tmp_path / "lib.jar"), "local:/opt/jars/x.jar"],
            packages=["org.example:one:1.0,org.example:two:2.0"],
        ),
        {"spark.jars.packages": "org.example:mine:3.0"},
    )
    assert [(f.name, f.role) for f in shipment.files] == [
        (MODULES_ZIP, "modules"),
        ("deps.zip", "py-file"),
        ("a.csv", "file"),
        ("lib.jar", "jar"),
    ]
    assert shipment.spark_conf == {
        "spark.submit.pyFiles": "s3a://bucket/remote.zip",
        "spark.jars": "local:/opt/jars/x.jar",
        "spark.jars.packages": "org.example:one:1.0,org.example:two:2.0,org.example:mine:3.0",
    }
    assert shipment.import_paths == (tmp_path / "deps.zip",)


def test_relative_arguments_that_exist_here_are_refused(tmp_path: Path) -> None:
    write(tmp_path, {"sales.csv": "", "data/day1.csv": ""})
    warnings: list[str] = []
    check = lambda args, shipped=(): check_arguments(  # noqa: E731
        args, set(shipped), warnings.append, tmp_path
    )
    check(["2026-11-21", "--verbose", "s3://b/in", "/abs/path", "", 3])
    assert warnings == []
    check(["sales.csv"], shipped=["sales.csv"])
    with pytest.raises(
        ConfigError, match=re.escape("ship it with --files sales.csv and pass sales.csv")
    ):
        check(["sales.csv"])
    with pytest.raises(ConfigError, match=re.escape("it is shipped as 'day1.csv': pass that")):
        check(["data/day1.csv"], shipped=["day1.csv"])
    with pytest.raises(ConfigError, match="pass an absolute path or a URI that the driver"):
        check(["data"])
    check(["out/", "./later.csv", "plain-word"])
    assert [w.split("'")[1] for w in warnings] == ["out/", "./later.csv"]


def function_job(files: tuple[ShippedFile, ...] = (), **changes: Any) -> JobDefinition:
    return JobDefinition.for_function("j", len, args=("abc",), files=files, **changes)


def test_lay_out_puts_files_in_place_and_tells_spark(tmp_path: Path) -> None:
    files = (
        ShippedFile("deps.zip", "py-file", b"zip"),
        ShippedFile("single.py", "py-file", b"X = 1\n"),
        ShippedFile("a.csv", "file", b"1,2\n"),
        ShippedFile("lib.jar", "jar", b"PK"),
        ShippedFile(MODULES_ZIP, "modules", b"zip"),
    )
    definition = function_job(files, spark_conf={"spark.files": "hdfs:///x.csv"})
    laid = lay_out(definition, tmp_path / "attempt")
    assert sorted(p.name for p in laid.path.iterdir()) == sorted(f.name for f in files)
    assert (laid.path / "a.csv").read_bytes() == b"1,2\n"
    assert laid.python_path == (
        str(laid.path / MODULES_ZIP),
        str(laid.path / "deps.zip"),
        str(laid.path),
    )
    assert laid.spark_conf == {
        "spark.submit.pyFiles": ",".join(
            str(laid.path / n) for n in (MODULES_ZIP, "deps.zip", "single.py")
        ),
        "spark.files": f"{laid.path / 'a.csv'},hdfs:///x.csv",
        "spark.jars": str(laid.path / "lib.jar"),
        "spark.ui.showConsoleProgress": "false",  # issue 27: no progress bar in driver logs
        "spark.ui.killEnabled": "false",  # issue 54: nobody kills a job from its UI
    }
    script = JobDefinition.for_script("s", "print(1)\n", filename="/home/me/etl.py")
    laid_script = lay_out(script, tmp_path / "script")
    assert laid_script.script == tmp_path / "script" / "etl.py"
    assert laid_script.script.read_text() == "print(1)\n"


def test_definitions_refuse_two_files_of_one_name_and_unsafe_names() -> None:
    with pytest.raises(ConfigError, match=re.escape("two shipped files are named 'a.csv'")):
        function_job((ShippedFile("a.csv", "file", b""), ShippedFile("a.csv", "jar", b"")))
    for name in ("../x", "a/b", ".hidden", "with space"):
        with pytest.raises(ConfigError, match="rename the file to ship it"):
            ShippedFile(name, "file", b"")


def test_function_code_is_loaded_only_when_asked(tmp_path: Path) -> None:
    module = tmp_path / "gone_later.py"
    module.write_text("def work(ctx):\n    return 'done'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import gone_later  # type: ignore[import-not-found]

        definition = JobDefinition.for_function("j", gone_later.work)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("gone_later", None)
    assert definition.summary()["entry"] == "gone_later.py:work"
    with pytest.raises(IncompatiblePayload, match="No module named 'gone_later'"):
        definition.load_function()
    sys.path.insert(0, str(tmp_path))
    try:
        function, args = definition.load_function()
        assert (function(None, *args), args) == ("done", ())
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("gone_later", None)


def test_headline_is_the_line_that_says_what_went_wrong() -> None:
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n'
    assert headline(traceback) == "ValueError: bad"
    assert headline("driver of attempt 2 ended (killed?)\nmore") == (
        "driver of attempt 2 ended (killed?)"
    )
    assert headline(None) is None and headline("  \n") is None

"""Issue 61.1: one command line in one room.

- Every command-line module lives in one package, :mod:`recovery.cli`, above both libraries: no
  module of ``zkstore`` or ``recovery`` outside it imports click (the dev commands aside, which
  the root group loads by name).
- One module per noun: the root group names each command with ONE module (or package), and
  every verb of the noun is defined there (``jobs wait`` is not in ``submit.py``, ``schedules
  create`` not apart from its siblings).
- No ZooKeeper write in the command line: no function of the package calls a writing method
  (``create``, ``set``, ``delete``, ``transaction``, ``write``, ``set_paused``...) on a
  ZooKeeper session, a cluster or a store; it calls a service function that the HTTP API can
  call too.

Pure: the tree's source and the click group in this process, no cluster.
"""

from __future__ import annotations

import ast
from pathlib import Path

import click
import pytest

from recovery.cli.base import LazyGroup
from recovery.cli.main import cli
from tests.helpers import REPO

pytestmark = pytest.mark.unit

#: The methods that write to ZooKeeper (kazoo's, zkstore.zookeeper.zk's, the stores' own verbs).
WRITES = frozenset(
    {
        "create",
        "create_async",
        "set",
        "set_async",
        "set_paused",
        "delete",
        "delete_async",
        "ensure_path",
        "transaction",
        "commit",
        "write",
    }
)
#: What a ZooKeeper session, a cluster or a store is called where the command line holds one.
RECEIVERS = ("zk", "store", "cluster", "client", "kazoo", "session")

DEV = ("zkstore/dev/", "recovery/dev/")


def _sources(top: str) -> list[Path]:
    return sorted(p for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def _imports_click(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "click" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "click":
            return True
    return False


def _receiver(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _receiver(node.func)
    return None


def zookeeper_writes(source: str) -> list[str]:
    """``function: receiver.method(`` for every writing call on a session, cluster or store."""
    found = []
    tree = ast.parse(source)
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in WRITES:
                continue
            receiver = (_receiver(node.func.value) or "").lower()
            if receiver.endswith(RECEIVERS):
                found.append(f"{func.name}: {receiver}.{node.func.attr}(")
    return sorted(set(found))


def test_only_the_cli_package_imports_click() -> None:
    outside = [
        path.relative_to(REPO).as_posix()
        for top in ("zkstore", "recovery")
        for path in _sources(top)
        if not path.relative_to(REPO).as_posix().startswith(("recovery/cli/", *DEV))
        and _imports_click(ast.parse(path.read_text()))
    ]
    assert outside == [], f"command-line modules outside recovery/cli: {outside}"


def test_each_noun_is_one_module_holding_all_its_verbs() -> None:
    assert isinstance(cli, LazyGroup)
    ctx = click.Context(cli)
    spread = {}
    for name, (home, _help) in sorted(cli.lazy.items()):
        assert isinstance(home, str), f"{name} is defined by {home}: one module per noun"
        assert home.startswith("recovery.cli."), (name, home)
        command = cli.get_command(ctx, name)
        assert command is not None, name
        commands = [command]
        if isinstance(command, click.Group):
            commands += list(command.commands.values())
        for each in commands:
            module = getattr(each.callback, "__module__", "")
            if module != home and not module.startswith(home + "."):
                spread[f"{name} {each.name}"] = module
    assert spread == {}, f"verbs defined apart from their noun's module: {spread}"


def test_no_function_of_the_command_line_writes_to_zookeeper() -> None:
    writes = {
        path.relative_to(REPO).as_posix(): found
        for path in _sources("recovery/cli")
        if (found := zookeeper_writes(path.read_text()))
    }
    assert writes == {}, f"ZooKeeper writes in the command line (call a service function): {writes}"


def test_the_write_finder_finds_what_it_looks_for() -> None:
    source = (
        "def a(store, cluster, out):\n"
        "    store.delete('x')\n"
        "    cluster.zk.set('/p', b'')\n"
        "    out.write('a line')\n"
        "    cluster.zk.get('/p')\n"
        "    with cluster.zk.transaction() as t:\n"
        "        pass\n"
    )
    assert zookeeper_writes(source) == [
        "a: store.delete(",
        "a: zk.set(",
        "a: zk.transaction(",
    ]

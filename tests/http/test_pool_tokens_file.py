"""``--api-token-file`` with tokens of pools (issue 59): parsed once, at the edge; every mistake
is a one-line ConfigError naming the line, never the token."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.observe.access import EVERY_POOL, Tokens
from recovery.settings import PoolToken, api_tokens_from_env
from zkstore.errors import ConfigError

pytestmark = pytest.mark.unit

CLUSTER = "c" * 20
ETL = "e" * 20


def token_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tokens"
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_lines_are_the_cluster_wide_token_and_tokens_of_pools(tmp_path: Path) -> None:
    path = token_file(tmp_path, f"# tokens\n\n{CLUSTER}\n{ETL} pool=etl,reporting\n")
    cluster, scoped = api_tokens_from_env({}, file=path)
    assert cluster == CLUSTER
    assert scoped == (PoolToken(ETL, frozenset({"etl", "reporting"})),)
    assert ETL not in repr(scoped)
    only_scoped = token_file(tmp_path, f"{ETL} pool=etl\n")
    assert api_tokens_from_env({}, file=only_scoped)[0] is None
    # no file: the variable's token alone, as before
    assert api_tokens_from_env({"ZKSTORE_API_TOKEN": CLUSTER}) == (CLUSTER, ())


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (f"{CLUSTER}\n{ETL}\n", "line 2: a second cluster-wide token"),
        (f"{CLUSTER}\nshort pool=etl\n", "line 2: the token is too short"),
        (f"{ETL} pools=etl\n", "line 1: after the token, only pool=NAME"),
        (f"{ETL} pool=etl extra\n", "line 1: after the token, only pool=NAME"),
        (f"{ETL} pool=etl\n{ETL} pool=bulk\n", "line 2: the token is given twice"),
        (f"{ETL} pool=\n", "line 1: invalid pool name"),
    ],
)
def test_a_line_that_is_not_a_token_is_refused_naming_it(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(ConfigError, match=said) as raised:
        api_tokens_from_env({}, file=token_file(tmp_path, text))
    assert ETL not in str(raised.value) and CLUSTER not in str(raised.value)


def test_a_scoped_token_reaches_its_pools_and_guards_the_reads() -> None:
    tokens = Tokens(CLUSTER, None, (PoolToken(ETL, frozenset({"etl"})),))
    scope = tokens.scope(f"Bearer {ETL}")
    assert scope.allows("etl") and not scope.allows("bulk")
    assert tokens.scope(f"Bearer {CLUSTER}") == EVERY_POOL
    assert tokens.scope("Bearer nope") == EVERY_POOL
    assert tokens.reads(f"Bearer {ETL}") and tokens.reads(f"Bearer {CLUSTER}")
    assert not tokens.reads(""), "with tokens of pools, the reads are guarded"
    assert Tokens(CLUSTER).reads(""), "without, they are free as before"

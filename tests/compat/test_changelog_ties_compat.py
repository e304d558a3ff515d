"""pypaimon reads the winner of an equal-sequence tie that lakecore's compaction settled.

Two writers started from one snapshot give key 1 the same sequence number at the max level
("a") and in level 0 ("b"). Paimon's rule (``LookupChangelogMergeFunctionWrapper``: the level
>= 1 record wins the tie) makes "a" the value; lakecore's compaction drops the tied level-0 row
(``compact/ties.py``), so no tie is left on disk for pypaimon's merge (whose heap has no rule
for ties) and pypaimon reads "a" too.
"""

from __future__ import annotations

import pytest

from tests.compact.test_changelog_semantics import make_tie, state, table
from tests.compat.pypaimon_runner import canonical, paimon_read, requires_paimon

pytestmark = [pytest.mark.compat, requires_paimon]


@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
def test_pypaimon_reads_the_tie_winner_after_compaction(tmp_path, engine):
    t = table(tmp_path, **{"write-only": "true", "changelog-producer": "lookup",
                           "merge-engine": engine})
    make_tie(t)
    t.compact()
    expected = [(0, "base"), (1, "a"), (5, "b"), (9, "base")]
    assert state(t) == expected
    got = canonical(paimon_read(str(tmp_path), "db.t"), "id")
    assert [(r["id"], r["v"]) for r in got] == expected

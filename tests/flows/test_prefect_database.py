"""The migrated Prefect database the tests copy (``tests/prefect_database.py``) is one Prefect's
own migrations leave: every table at the newest revision, and nothing else in it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from prefect_database import DIRECTORY_VARIABLE, prefect_home, template


def _revision(path: Path) -> list[str]:
    with sqlite3.connect(path) as connection:
        return [row[0] for row in connection.execute("SELECT version_num FROM alembic_version")]


def test_a_seeded_home_is_at_prefects_newest_revision_with_no_runs(tmp_path: Path) -> None:
    import prefect.server.database
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    home = prefect_home(tmp_path / "prefect")
    database = home / "prefect.db"
    assert database.read_bytes() == template(Path(os.environ[DIRECTORY_VARIABLE])).read_bytes()
    migrations = Path(prefect.server.database.__file__).parent / "_migrations"
    config = Config()
    config.set_main_option("path_separator", "os")
    config.set_main_option("script_location", str(migrations))
    config.set_main_option("version_locations", str(migrations / "versions" / "sqlite"))
    heads = ScriptDirectory.from_config(config).get_heads()
    assert len(heads) == 1
    assert _revision(database) == heads
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT count(*) FROM flow_run").fetchone() == (0,)
        assert connection.execute("SELECT count(*) FROM task_run").fetchone() == (0,)


def test_a_home_that_has_a_database_keeps_it(tmp_path: Path) -> None:
    database = tmp_path / "prefect" / "prefect.db"
    database.parent.mkdir()
    database.write_bytes(b"someone's")
    prefect_home(tmp_path / "prefect")
    assert database.read_bytes() == b"someone's"

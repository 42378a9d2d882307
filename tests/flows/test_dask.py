"""The fold tasks on a 2-worker local Dask cluster (prefect-dask) give the same table."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.sliding_window import sliding_window_eval

pytest.importorskip("prefect_dask", reason="the dask extra is not installed")


def test_dask_task_runner_on_a_two_worker_local_cluster(
    write_log, make_config, tmp_path: Path, mlflow_uri: str
) -> None:
    data = write_log(8)
    dask = make_config(data, output=str(tmp_path / "dask"), task_runner="dask", workers=2)
    outputs = sliding_window_eval(config=dask)
    reference = make_config(data, output=str(tmp_path / "seq"), tracking=False)
    sliding_window_eval(config=reference)
    assert (tmp_path / "dask" / "results.csv").read_text() == (
        tmp_path / "seq" / "results.csv"
    ).read_text()
    assert len(list((tmp_path / "dask" / "units").glob("f*__*.json"))) == 12
    assert set(outputs.devices) == {"pop", "pop-n"}

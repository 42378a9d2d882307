"""What a run shows in Prefect's UI: distinct flow-run names, a keyed summary table artifact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
from sweval_testing import use_plugins

from sweval.evaluators.config.model import EvalConfig
from sweval.flows.prefect_ui import artifact_key, flow_run_name, short_label, summary_table
from sweval.flows.sliding_window import sliding_window_eval

OWN_MODEL = '''
from sweval.algorithms import Algorithm, TrainData


class CoVisit(Algorithm):
    def _fit(self, train: TrainData) -> None:
        pass
'''


def _config(tmp_path: Path, algorithms: list[str], output: str = "out") -> EvalConfig:
    return EvalConfig.build(data=str(tmp_path / "ml-100k.csv"), window="7D",
                            algorithms=algorithms, output=str(tmp_path / output))


def test_flow_run_names_tell_a_plain_run_from_an_own_model_run(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_models.py").write_text(OWN_MODEL)
    use_plugins(monkeypatch, tmp_path)
    plain = flow_run_name(_config(tmp_path, ["pop", "item-knn"]))
    own = flow_run_name(_config(tmp_path, ["pop", "my_models:CoVisit"]))
    aliased = flow_run_name(_config(tmp_path, ["cv=my_models:CoVisit"]), rolling=True)
    assert plain == "ml-100k-w7D · pop+item-knn"
    assert own == "ml-100k-w7D · pop+CoVisit"
    assert aliased == "ml-100k-w7D-rolling · cv"
    assert short_label("my_pkg.models:CoVisit(days=1)") == "CoVisit(days=1)"
    many = flow_run_name(_config(tmp_path, [
        "pop", "pop-n", "item-knn", "user-knn", "svd", "ease", "bpr", "lmf", "decay-pop",
        "item-knn(n_neighbors=50)"]))
    labels = many.split(" · ")[1]
    assert labels.startswith("pop+pop-n+item-knn+") and labels.endswith(" more")
    shown = labels.split("+")
    assert len(shown) - 1 + int(shown[-1].split()[0]) == 10  # every configuration counted
    assert len(labels) <= 48 + len("+10 more")


def test_artifact_key_is_stable_for_an_output_and_valid_for_prefect(tmp_path) -> None:
    from prefect.types.names import raise_on_name_alphanumeric_dashes_only as check_key

    first = artifact_key(_config(tmp_path, ["pop"]))
    assert first == artifact_key(_config(tmp_path, ["pop", "item-knn"]))  # same output
    assert first != artifact_key(_config(tmp_path, ["pop"], output="other"))
    assert first.startswith("sweval-ml-100k-")
    odd = EvalConfig.build(data=str(tmp_path / "My Data_2024.csv"), output=str(tmp_path / "o"))
    assert check_key(artifact_key(odd)) == artifact_key(odd) == "sweval-my-data-2024-" + artifact_key(odd)[-8:]


def test_summary_table_keeps_stratum_all_and_blank_intervals() -> None:
    summary = pd.DataFrame({
        "algorithm": ["pop", "pop", "pop"], "stratum": ["all", "all", "A"],
        "metric": ["recall", "r_precision", "recall"], "k": [10.0, float("nan"), 10.0],
        "mean": [0.123456, 0.2, 0.3], "ci_low": [0.1, float("nan"), 0.2],
        "ci_high": [0.15, float("nan"), 0.4], "n_folds": [6, 6, 6],
    })
    assert summary_table(summary) == [
        {"algorithm": "pop", "metric": "recall", "k": "10", "mean": 0.1235, "ci_low": 0.1,
         "ci_high": 0.15, "n_folds": 6},
        {"algorithm": "pop", "metric": "r_precision", "k": "", "mean": 0.2, "ci_low": "",
         "ci_high": "", "n_folds": 6},
    ]


async def _read(key: str, flow_run_id: str) -> tuple[list, str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async with get_client() as client:
        artifacts = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
        run = await client.read_flow_run(flow_run_id)
    return artifacts, run.name


@pytest.mark.slow
def test_each_run_adds_its_summary_to_the_output_s_artifact_history(
    write_log, make_config, tmp_path: Path
) -> None:
    config = make_config(write_log(8), tracking=False)
    first = sliding_window_eval(config=config, return_state=True)
    second = sliding_window_eval(config=config, return_state=True)  # every unit reused
    key = artifact_key(config)
    artifacts, name = asyncio.run(_read(key, str(second.state_details.flow_run_id)))
    assert name == "log-w1D · pop+pop-n"
    assert len(artifacts) == 2 and {a.type for a in artifacts} == {"table"}
    assert {str(a.flow_run_id) for a in artifacts} == {
        str(first.state_details.flow_run_id), str(second.state_details.flow_run_id)}
    summary = pd.read_csv(Path(config.output) / "summary.csv")
    expected = summary[summary["stratum"] == "all"]
    for artifact in artifacts:
        table = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
        assert len(table) == len(expected)
        for row, want in zip(table, expected.to_dict("records"), strict=True):
            assert row["algorithm"] == want["algorithm"] and row["metric"] == want["metric"]
            assert row["mean"] == pytest.approx(want["mean"], abs=5e-5)
    reused = [a for a in artifacts
              if str(a.flow_run_id) == str(second.state_details.flow_run_id)][0]
    assert "0 units computed, 12 reused" in reused.description

"""Prints the runs of an MLflow tracking store as JSON, through MLflow's own client (run in the training venv).

Usage: python read_mlflow.py TRACKING_URI
"""

from __future__ import annotations

import json
import sys

from mlflow.tracking import MlflowClient


def main(uri: str) -> None:
    client = MlflowClient(tracking_uri=uri)
    runs = []
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id]):
            history = {
                key: [
                    (m.step, m.value)
                    for m in sorted(
                        client.get_metric_history(run.info.run_id, key), key=lambda m: (m.step, m.timestamp)
                    )
                ]
                for key in ("loss", "world_size")
            }
            runs.append(
                {
                    "name": run.info.run_name,
                    "status": run.info.status,
                    "params": run.data.params,
                    "metrics": run.data.metrics,
                    "history": history,
                }
            )
    print(json.dumps({"runs": runs}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])

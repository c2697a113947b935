"""A user's RPO notifier, as docs/monitoring.md shows one: an Airflow BaseNotifier whose templated
text names the verdict; it appends what it was told to the file $MIRRORFLOW_TEST_RPO_ALERTS."""
from __future__ import annotations

import json
import os

from airflow.sdk import BaseNotifier


class FileNotifier(BaseNotifier):
    template_fields = ("text",)

    def __init__(self, text: str = "{{ rpo.flow }}: {{ rpo.line }}") -> None:
        super().__init__()
        self.text = text

    def notify(self, context) -> None:
        with open(os.environ["MIRRORFLOW_TEST_RPO_ALERTS"], "a") as f:
            f.write(json.dumps({"text": self.text, "state": context["rpo"]["state"],
                                "task": context["ti"].task_id if "ti" in context else None}) + "\n")


ALERTS = FileNotifier()

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self) -> None:
        from engine.loop import RUN_IO
        from evaluation.replay import evaluation_io

        RUN_IO["evaluation"] = evaluation_io

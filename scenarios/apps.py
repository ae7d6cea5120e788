from django.apps import AppConfig


class ScenariosConfig(AppConfig):
    name = "scenarios"

    def ready(self) -> None:
        from engine.loop import RUN_IO

        RUN_IO["scenario"] = _scenario_io


def _scenario_io(run):
    """A scenario run's wrappers; the harness is imported with the first scenario run, never by a real one."""
    from scenarios.harness import scenario_io

    return scenario_io(run)

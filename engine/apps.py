from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class EngineConfig(AppConfig):
    name = "engine"
    label = "agentrun"  # the tables, permissions and migrations keep the label they were made with
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        from engine.checks import approval_time_check, signing_secret_check
        from tools.registry import TOOLS

        checks.register(approval_time_check)
        checks.register(signing_secret_check, checks.Tags.security, deploy=True)

        # A misspelt tool here would quietly switch its approval gate off: refuse to start instead.
        unknown = sorted(set(settings.AGENT_REQUIRE_APPROVAL) - TOOLS.keys())
        if unknown:
            raise ImproperlyConfigured(
                f"AGENT_REQUIRE_APPROVAL names no such tool: {', '.join(unknown)} (the tools are {', '.join(TOOLS)})"
            )

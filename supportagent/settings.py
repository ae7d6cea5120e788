"""Settings, read from the environment.

With no environment set the app runs on a SQLite file and executes
investigations inline. `DATABASE_URL` (PostgreSQL) and `CELERY_BROKER_URL`
(Redis) switch to the production shape. Bad values raise ImproperlyConfigured.
"""

import ipaddress
import math
import os
import re
import zoneinfo
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from kit.lines import line_break_in

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SUPPORTAGENT_VAR_DIR", BASE_DIR / "var"))


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name)
    if not raw:
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_float(name: str, default: float) -> float:
    raw = env_str(name)
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ImproperlyConfigured(f"{name} must be a finite number of seconds more than 0, got {raw!r}")
    return value


def env_int(
    name: str, default: int, *, minimum: int = 1, maximum: int | None = None, what: str = "a whole number"
) -> int:
    """A whole number from `minimum` to `maximum`; `what` names it in the error."""
    raw = env_str(name)
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {what}, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"at least {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise ImproperlyConfigured(f"{name} must be {what} {bounds}, got {raw!r}")
    return value


def env_dollars(name: str, default: str) -> Decimal:
    """An amount of dollars, 0 or more, to the cent (e.g. 10 or 12.50)."""
    raw = env_str(name) or default
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise ImproperlyConfigured(f"{name} must be an amount of dollars such as 10 or 12.50, got {raw!r}") from None
    if not value.is_finite() or value < 0 or value != value.quantize(Decimal("0.01")) or value >= 10**8:
        raise ImproperlyConfigured(f"{name} must be dollars from 0 to 99999999.99, to the cent, got {raw!r}")
    return value


def env_choice(name: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (the first when unset), case-insensitively."""
    raw = env_str(name).lower() or choices[0]
    if raw not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}; got {raw!r}")
    return raw


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    return [item.strip() for item in raw.split(",") if item.strip()] if raw else default


def env_time_zone(name: str, default: str = "UTC") -> str:
    """An IANA time zone name (such as Europe/Berlin), checked against the zoneinfo database."""
    raw = env_str(name) or default
    if raw not in zoneinfo.available_timezones():  # the names a staff member may choose (StaffPreference)
        raise ImproperlyConfigured(f"{name} must be a time zone name such as Europe/Berlin, got {raw!r}")
    return raw


def env_seconds(name: str, default: int) -> int:
    """A whole number of seconds, 0 allowed (to switch a feature off)."""
    return env_int(name, default, minimum=0, what="a whole number of seconds")


def repetitive(key: str) -> bool:
    """Whether `key` repeats itself: fewer than three quarters of its three-character runs are distinct.
    A random key repeats almost none (a 64-digit hex key neither); `"abcde" * 10` has 5 of 48."""
    runs = [key[i : i + 3] for i in range(len(key) - 2)]
    return len(set(runs)) < 0.75 * len(runs)


def strong_secret_key(name: str) -> str:
    """The secret key from `name`, refused unless it is at least as strong as Django's deploy check asks
    (at least 50 characters, at least 5 distinct ones, not one of Django's generated insecure keys)
    and does not repeat itself."""
    key = env_str(name)
    if not key:
        raise ImproperlyConfigured(f"{name} must be set when DJANGO_DEBUG is off")
    if len(key) < 50 or len(set(key)) < 5 or key.startswith("django-insecure-") or repetitive(key):
        raise ImproperlyConfigured(
            f"{name} is too weak: use at least 50 random characters, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    return key


DEBUG = env_bool("DJANGO_DEBUG", True)
if DEBUG:
    SECRET_KEY = env_str("DJANGO_SECRET_KEY") or "insecure-development-key-only-for-the-embedded-demo"
else:
    SECRET_KEY = strong_secret_key("DJANGO_SECRET_KEY")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])

# HTTPS. With DEBUG off the app expects to be served over HTTPS only: cookies are sent over HTTPS
# only, plain HTTP is redirected and browsers are told (HSTS) to use HTTPS. Behind a proxy that
# terminates TLS, DJANGO_SECURE_PROXY_SSL_HEADER=true trusts its X-Forwarded-Proto header (set it
# only when the proxy always sets that header and strips a client's own).
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_seconds("DJANGO_SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", not DEBUG)
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "tickets",
    "engine",
    "integrations",
    "evaluation",
    "staff",
    "scenarios",
]

MIDDLEWARE = [
    "supportagent.ops.OpsMiddleware",  # /healthz, /readyz, /metrics: before the host check and the HTTPS redirect
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files from the web process itself, before any session work
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "staff.middleware.StaffTimeZoneMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out login
]

ROOT_URLCONF = "supportagent.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "staff.context_processors.waiting_approvals",
            ],
        },
    },
]
WSGI_APPLICATION = "supportagent.wsgi.application"


def database_config() -> dict:
    """The default database: PostgreSQL with its pool and plans when DATABASE_URL names one, else a SQLite file."""
    url = env_str("DATABASE_URL")
    if url:
        try:
            config = dj_database_url.parse(url)
        except ValueError as exc:
            raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
        if config["ENGINE"] != "django.db.backends.postgresql":
            raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgres://...)")
        # A process shares a small pool; a run holds a connection only inside a step's
        # transaction, never while it waits for a model or a tool. `timeout`: how long a step
        # waits for a connection, the server restarting or down included (engine.loop tries a
        # step whose connection was lost again, CONNECTION_TRIES times in all); a lookup waits
        # less, within its own time (tools.dispatch).
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": env_int("DATABASE_POOL_MAX", 16),
            "timeout": env_float("DATABASE_POOL_TIMEOUT", 20.0),
        }
        # A worker repeats the same few statements: bound on the server and prepared
        # after 5 uses on a connection, PostgreSQL stops planning them every time.
        # Off for a pooler that cannot carry prepared statements across connections.
        if env_bool("DATABASE_PREPARED_STATEMENTS", True):
            config["OPTIONS"] |= {"server_side_binding": True, "prepare_threshold": 5}
        # How PostgreSQL plans a statement prepared on a connection. `auto` (its own default) runs it, after
        # five runs, with one plan made for any value: right for a worker, whose steps repeat a few statements
        # by primary key (planning each again cost 14.4 -> 18.6 ms of PostgreSQL's CPU a J-42 run,
        # bench/loop_bench.py). Wrong for staff pages, whose values can be rare: such a plan cannot tell the few
        # pending packets from a year's others, and a packet's page took 1.3 s from its 11th load on a
        # connection, 0.09 s planned for its values (1,000,000 runs, bench/pages_bench.py). The web process
        # asks for `force_custom_plan` (supportagent.wsgi).
        plan = env_choice("DATABASE_PLAN_CACHE_MODE", ("auto", "force_custom_plan"))
        # PostgreSQL compiles a statement it expects to be costly (JIT), which a trigram search's estimate
        # always is: the ticket list searched for a ref spent 1,045 of its 1,054 ms compiling at 1,000,000
        # runs. The web process turns it off (supportagent.wsgi); a worker's statements never cost enough.
        jit = "on" if env_bool("DATABASE_JIT", True) else "off"
        config["OPTIONS"]["options"] = f"-c plan_cache_mode={plan} -c jit={jit}"
        return config
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": env_str("SQLITE_PATH") or str(VAR_DIR / "supportagent.sqlite3"),
        # Tool dispatches read from their own thread: a file (not memory) and
        # WAL let them read while the loop writes.
        "TEST": {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")},
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


DATABASES = {"default": database_config()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Admin logins are throttled by django-axes: after ADMIN_LOGIN_FAILURE_LIMIT failed logins
# a login is refused (429), the right password included, for ADMIN_LOGIN_COOLOFF_MINUTES.
# Failures are counted per username and address together, so that nobody can lock a user
# out from elsewhere; "user_or_address" counts them per username and per address apart.
# Only password logins go through axes: API tokens (staff.auth) are not passwords.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("ADMIN_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("ADMIN_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = {
    "user_and_address": [["username", "ip_address"]],
    "user_or_address": ["username", "ip_address"],
}[env_choice("ADMIN_LOGIN_LOCKOUT_BY", ("user_and_address", "user_or_address"))]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "admin/locked_out.html"

# Django's four: not like the username or e-mail, at least 12 characters, not a common password, not all digits.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["kit.formats"]  # one date-and-time format, labelled with its zone
TIME_ZONE = env_time_zone("DJANGO_TIME_ZONE")  # the staff pages' zone for those with no preference
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# `manage.py collectstatic` copies the admin's and ninja's files here; WhiteNoise serves them from the web process
# (gunicorn) with DEBUG off, so no other server is needed for them.
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT") or VAR_DIR / "static")
# With DEBUG off, collectstatic also writes compressed copies and names each file after its content (admin/css/
# base.css becomes base.<hash>.css), so browsers may cache them for ever and a deploy never serves a stale one.
# A page rendered before collectstatic ran is an error then: collectstatic is a deploy step (docs/production/
# deployment.md). Development and the tests keep Django's plain storage, which needs no collectstatic.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Celery: inline (eager) unless a broker is configured.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = env_str("AGENT_QUEUE", "supportagent")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker that lost the broker tries again every AGENT_BROKER_RETRY_SECONDS, for ever (supportagent.broker):
# Celery's own delays grow by 2 s a try, which kept workers away for up to 10 s after the broker was back.
CELERY_WORKER_CONSUMER = "supportagent.broker:Consumer"
if CELERY_BROKER_URL.startswith("redis://"):  # kombu's Redis transport, surviving a lost connection (there)
    CELERY_BROKER_TRANSPORT = "supportagent.broker:RedisTransport"
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
AGENT_BROKER_RETRY_SECONDS = env_float("AGENT_BROKER_RETRY_SECONDS", 1.0)
AGENT_BROKER_PROBE_SECONDS = 0.5  # a worker's watchdog asking the broker whether it is back (supportagent.broker)
# Sending a task gives up within about a second when the broker does not answer: the run is saved and the
# watchdog sends it once the broker is back (engine.tasks.enqueue_advance), so a web request never waits on it.
CELERY_BROKER_CONNECTION_TIMEOUT = 0.5
# A run whose worker lost the broker keeps going: it needs only the database, and its lease says who drives it.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 0.5}
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_IMPORTS = ["evaluation.tasks"]  # tasks outside the apps' tasks modules


# The watchdog ends overdue runs and requeues orphaned ones; it must run often
# enough to end a run within a second of its deadline.
AGENT_WATCHDOG_INTERVAL = env_float("AGENT_WATCHDOG_INTERVAL", 0.5)
# A requeued or never-claimed run is not requeued again before this.
AGENT_QUEUED_GRACE_SECONDS = env_float("AGENT_QUEUED_GRACE_SECONDS", 20.0)
AGENT_PROBE_REDIS_URL = CELERY_BROKER_URL or "redis://127.0.0.1:6379/0"
CELERY_BEAT_SCHEDULE = {
    "watchdog": {
        "task": "agentrun.watchdog",
        "schedule": AGENT_WATCHDOG_INTERVAL,
        "options": {"expires": AGENT_WATCHDOG_INTERVAL * 4},
    },
}


def env_cache(name: str, fallback: str) -> dict:
    """The default cache: `locmem` (this process only) or a redis:// / rediss:// URL shared by every process.

    Unset, a Redis broker (`fallback`) is shared the same way; anything else is locmem.
    """
    raw = env_str(name) or (fallback if fallback.lower().startswith(("redis://", "rediss://")) else "locmem")
    if raw.lower() == "locmem":
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "supportagent"}
    if not raw.lower().startswith(("redis://", "rediss://")):
        raise ImproperlyConfigured(f"{name} must be locmem or a redis:// or rediss:// URL")
    return {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": raw,
        "KEY_PREFIX": env_str("AGENT_CACHE_PREFIX", "supportagent"),
    }


CACHES = {"default": env_cache("AGENT_CACHE_URL", CELERY_BROKER_URL)}
# Evidence re-checked at review time (docs/staff/recheck.md): the time all of a packet's re-reads may take together,
# and how long a re-check is reused (a page reloaded within it reads nothing again).
AGENT_RECHECK_TIMEOUT = env_float("AGENT_RECHECK_TIMEOUT", 3.0)
AGENT_RECHECK_REUSE_SECONDS = env_int("AGENT_RECHECK_REUSE_SECONDS", 60)


# The agent. Budgets are defaults for new runs; each run stores its own copy.
AGENT_MODEL = env_str("AGENT_MODEL", "rules")
# Overrides of the contract's defaults (CONFORMANCE §2) for new runs, e.g. {"max_tool_attempts": 4}.
AGENT_BUDGET_DEFAULTS: dict = {}
# Dollars per million tokens, (input, output), per model name.
AGENT_MODEL_PRICES: dict[str, tuple[str, str]] = {
    "rules": ("0", "0"),
    "replay": ("0", "0"),
    # Provider models, "openai:<model>" / "anthropic:<model>": list prices when written; check
    # your provider's. A model not listed here needs AGENT_PRICE_* (fails closed otherwise).
    "openai:gpt-4o": ("2.50", "10.00"),
    "openai:gpt-4o-mini": ("0.15", "0.60"),
    "openai:gpt-4.1": ("2.00", "8.00"),
    "openai:gpt-4.1-mini": ("0.40", "1.60"),
    "anthropic:claude-sonnet-4-5": ("3.00", "15.00"),
    "anthropic:claude-haiku-4-5": ("1.00", "5.00"),
}
AGENT_PRICE_INPUT_PER_MTOK = env_str("AGENT_PRICE_INPUT_PER_MTOK")
AGENT_PRICE_OUTPUT_PER_MTOK = env_str("AGENT_PRICE_OUTPUT_PER_MTOK")
# Provider keys and endpoints come from the SDKs' own variables: OPENAI_API_KEY, OPENAI_BASE_URL,
# ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL. Prompts and replies are never logged unless this is
# "redacted": then the "agentrun.providers" logger (at INFO) shows them with every data block,
# the ticket's text and tool results, replaced by its size. Keys are never logged.
AGENT_LOG_PROMPTS = env_choice("AGENT_LOG_PROMPTS", ("off", "redacted"))
# How an openai:<model> request names its output cap and whether it sends parallel_tool_calls=false
# (agentrun/adapters/openai_chat.py). "auto" picks by endpoint and model; set one outright for a
# server or model that refuses the automatic choice.
AGENT_OPENAI_OUTPUT_CAP_FIELD = env_choice(
    "AGENT_OPENAI_OUTPUT_CAP_FIELD", ("auto", "max_completion_tokens", "max_tokens")
)
AGENT_OPENAI_PARALLEL_TOOL_CALLS = env_choice("AGENT_OPENAI_PARALLEL_TOOL_CALLS", ("auto", "false", "omit"))
AGENT_OPENAI_TOOL_CHOICE = env_choice("AGENT_OPENAI_TOOL_CHOICE", ("required", "omit"))
# A worker's lease on a run outlives one operation's longest wait by this much.
AGENT_LEASE_MARGIN_SECONDS = 5.0
AGENT_REQUIRE_APPROVAL: list[str] = env_list("AGENT_REQUIRE_APPROVAL", [])
# A run's deadline keeps running while it waits for approval: a start-up warning (agentrun.W001)
# when calls may need approval and new runs get less time than this to be answered.
AGENT_APPROVAL_MIN_SECONDS = env_seconds("AGENT_APPROVAL_MIN_SECONDS", 600)
# So a new run that may need approval gets at least this long before its deadline (other runs keep
# deadline_seconds, 45 s by default: CONFORMANCE §2); 0 gives them no more than other runs.
AGENT_APPROVAL_DEADLINE_SECONDS = env_seconds("AGENT_APPROVAL_DEADLINE_SECONDS", 900)
# E-mail (Django's own settings): supervisors with an address hear of a call waiting for approval.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "supportagent@localhost")


def env_url(name: str, *, required_by: str = "", placeholder: str = "") -> str:
    """An absolute http(s) URL (with `placeholder` in it, when given); empty when unset, unless
    `required_by` says which setting needs it. The value is never repeated: a URL may carry a token."""
    raw = env_str(name)
    if not raw:
        if required_by:
            raise ImproperlyConfigured(f"{name} must be set when {required_by}")
        return ""
    scheme, _, rest = raw.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.split("/", 1)[0]:
        raise ImproperlyConfigured(f"{name} must be an absolute http:// or https:// URL")
    if placeholder and placeholder not in raw:
        raise ImproperlyConfigured(f"{name} must contain {placeholder} where the job id goes")
    return raw


def packet_webhook() -> tuple[str, str, str]:
    """The packet webhook's URL, its signing secret and the site's base URL for links; all
    empty when no URL is set. A URL needs the secret and the base URL."""
    url, secret, site = (
        env_url("AGENT_PACKET_WEBHOOK_URL"),
        env_str("AGENT_PACKET_WEBHOOK_SECRET"),
        env_url("AGENT_SITE_URL").rstrip("/"),
    )
    if url and not secret:
        raise ImproperlyConfigured("AGENT_PACKET_WEBHOOK_SECRET must be set when AGENT_PACKET_WEBHOOK_URL is")
    if url and not site:
        raise ImproperlyConfigured(
            "AGENT_SITE_URL must be set when AGENT_PACKET_WEBHOOK_URL is: the events link to the admin"
        )
    return url, secret, site


# Packet notifications (agentrun/webhooks.py): a signed event to the help desk when a packet is
# written or reviewed. Unset URL: nothing is recorded or sent.
AGENT_PACKET_WEBHOOK_URL, AGENT_PACKET_WEBHOOK_SECRET, AGENT_SITE_URL = packet_webhook()
AGENT_PACKET_WEBHOOK_TIMEOUT = env_float("AGENT_PACKET_WEBHOOK_TIMEOUT", 5.0)
AGENT_PACKET_WEBHOOK_ATTEMPTS = env_int("AGENT_PACKET_WEBHOOK_ATTEMPTS", 5)
# The wait after the first failed attempt; it doubles after each further one, up to the cap.
AGENT_PACKET_WEBHOOK_BACKOFF_SECONDS = env_float("AGENT_PACKET_WEBHOOK_BACKOFF_SECONDS", 30.0)
AGENT_PACKET_WEBHOOK_BACKOFF_CAP_SECONDS = env_float("AGENT_PACKET_WEBHOOK_BACKOFF_CAP_SECONDS", 900.0)
# Tickets from a help desk (POST /api/tickets, POST /api/intake/zendesk). A ticket intake creates is
# investigated at once when this is on. The Zendesk webhook's signing secret: unset, that endpoint
# accepts nothing.
AGENT_AUTO_INVESTIGATE = env_bool("AGENT_AUTO_INVESTIGATE", False)
# Caps on those automatic investigations, per account (an account's own, set in the admin, replaces them):
# runs started in the last hour, and dollars per day (what today's automatic runs spent, those still
# going counted at their whole budget). A ticket over a cap waits for staff; 0 starts none.
AGENT_AUTO_RUNS_PER_HOUR = env_int("AGENT_AUTO_RUNS_PER_HOUR", 20, minimum=0)
AGENT_AUTO_DOLLARS_PER_DAY = env_dollars("AGENT_AUTO_DOLLARS_PER_DAY", "10")
INTAKE_ZENDESK_SECRET = env_str("INTAKE_ZENDESK_SECRET")
# The account (its code) a ticket gets when neither its account code, its organization nor its
# requester's e-mail domain names one; unset, such a ticket goes to the intake problems list.
INTAKE_DEFAULT_ACCOUNT = env_str("INTAKE_DEFAULT_ACCOUNT")


def zendesk_api() -> tuple[str, str, str]:
    """Zendesk's address, e.g. https://acme.zendesk.com, and the e-mail and API token `import_docs --zendesk-guide`
    reads the help center with (both or neither: without them only what anyone may read is listed)."""
    url, email, token = env_url("ZENDESK_URL").rstrip("/"), env_str("ZENDESK_EMAIL"), env_str("ZENDESK_API_TOKEN")
    if bool(email) != bool(token):
        raise ImproperlyConfigured("ZENDESK_EMAIL and ZENDESK_API_TOKEN must be set together (the token is not shown)")
    return url, email, token


# A secret: never logged or stored; Django's error pages hide settings named *TOKEN*.
ZENDESK_URL, ZENDESK_EMAIL, ZENDESK_API_TOKEN = zendesk_api()


def zendesk_notes(*, site_url: str, zendesk: tuple[str, str, str]) -> tuple[bool, bool]:
    """Whether a private note goes on a Zendesk ticket when its packet is written, and when it is reviewed.
    Both are on by default once ZENDESK_URL, ZENDESK_EMAIL and ZENDESK_API_TOKEN are set; a note needs all
    three, and AGENT_SITE_URL for its link to the packet."""
    configured = all(zendesk)
    switches = {
        name: env_bool(name, configured) for name in ("AGENT_ZENDESK_NOTE_ON_WRITTEN", "AGENT_ZENDESK_NOTE_ON_REVIEW")
    }
    named = [name for name, value in switches.items() if value]
    on = f"{' and '.join(named)} {'are' if len(named) > 1 else 'is'} on"
    if named and not configured:
        raise ImproperlyConfigured(f"{on}: a note needs ZENDESK_URL, ZENDESK_EMAIL and ZENDESK_API_TOKEN set")
    if named and not site_url:
        raise ImproperlyConfigured(
            f"AGENT_SITE_URL must be set when {on}: each note links to its packet"
            " (or set AGENT_ZENDESK_NOTE_ON_WRITTEN=false and AGENT_ZENDESK_NOTE_ON_REVIEW=false)"
        )
    written, reviewed = switches.values()
    return written, reviewed


# A private note on the Zendesk ticket (integrations/zendesknotes.py) when its packet is written and when
# it is reviewed, sent through the packet webhook's outbox (its timeout, attempts and backoff).
AGENT_ZENDESK_NOTE_ON_WRITTEN, AGENT_ZENDESK_NOTE_ON_REVIEW = zendesk_notes(
    site_url=AGENT_SITE_URL, zendesk=(ZENDESK_URL, ZENDESK_EMAIL, ZENDESK_API_TOKEN)
)


def env_header(name: str) -> tuple[str, str] | None:
    """A "Name: value" header (a credential: the value is never shown back)."""
    raw = env_str(name)
    if not raw:
        return None
    header, sep, value = raw.partition(":")
    if not sep or not header.strip() or not value.strip() or any(c in header for c in " \t\r\n"):
        raise ImproperlyConfigured(f'{name} must look like "Authorization: Bearer TOKEN" (its value is not shown)')
    if line_break_in(value):
        raise ImproperlyConfigured(f"{name} must be one line (its value is not shown)")
    return header.strip(), value.strip()


# Where the account-data tools read (agentrun/tools.py): our own tables, or the operator's services.
AGENT_JOB_STATUS_BACKEND = env_choice("AGENT_JOB_STATUS_BACKEND", ("database", "http"))
AGENT_SERVICE_STATUS_BACKEND = env_choice("AGENT_SERVICE_STATUS_BACKEND", ("database", "http"))
AGENT_JOB_STATUS_URL = (
    env_url("AGENT_JOB_STATUS_URL", required_by="AGENT_JOB_STATUS_BACKEND=http", placeholder="{job_id}")
    if AGENT_JOB_STATUS_BACKEND == "http"
    else env_str("AGENT_JOB_STATUS_URL")
)


def env_id_pattern(name: str, default: str) -> str:
    """A regular expression a whole id must match (re.fullmatch, ASCII); refused if it does not compile or
    matches the empty string (then every word would be a job id)."""
    raw = env_str(name) or default
    try:
        compiled = re.compile(raw, re.ASCII)
    except re.error as exc:
        raise ImproperlyConfigured(f"{name} must be a regular expression, got {raw!r}: {exc}") from None
    if compiled.fullmatch(""):
        raise ImproperlyConfigured(f"{name} must not match an empty id, got {raw!r}")
    return raw


# The operator's job ids: the demo's J-<digits> unless set (docs/production/settings.md has examples).
AGENT_JOB_ID_PATTERN = env_id_pattern("AGENT_JOB_ID_PATTERN", r"J-[0-9]{1,12}")
# (name, value), or None. A secret: never logged; Django's error pages hide settings named *AUTH*.
AGENT_JOB_STATUS_AUTH_HEADER = env_header("AGENT_JOB_STATUS_AUTH_HEADER")
AGENT_SERVICE_STATUS_URL = (
    env_url("AGENT_SERVICE_STATUS_URL", required_by="AGENT_SERVICE_STATUS_BACKEND=http")
    if AGENT_SERVICE_STATUS_BACKEND == "http"
    else env_str("AGENT_SERVICE_STATUS_URL")
)


def env_port(name: str) -> int:
    """A TCP port, or 0 (unset) for none."""
    return env_int(name, 0, minimum=0, maximum=65535, what="a port number (0 or unset: none)")


def env_networks(name: str, default: list[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Comma-separated addresses or networks (`10.0.0.0/8`, `::1`)."""
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in env_list(name, default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must list IP addresses or networks: {exc}") from None


def env_token(name: str) -> str:
    """A shared secret, empty when unset; a short one is refused."""
    token = env_str(name)
    if token and len(token) < 24:
        raise ImproperlyConfigured(f"{name} must be at least 24 random characters when set")
    return token


# Monitoring (docs/production/monitoring.md). Metrics are counted unless AGENT_METRICS is off; /metrics on the web
# process answers the listed addresses, or anyone with the bearer token; each worker process serves its
# own on AGENT_METRICS_PORT (0: none) at AGENT_METRICS_BIND.
AGENT_METRICS = env_bool("AGENT_METRICS", True)
AGENT_METRICS_ALLOWED = env_networks("AGENT_METRICS_ALLOWED", ["127.0.0.1", "::1"])
AGENT_METRICS_TOKEN = env_token("AGENT_METRICS_TOKEN")
AGENT_METRICS_PORT = env_port("AGENT_METRICS_PORT")
AGENT_METRICS_BIND = env_str("AGENT_METRICS_BIND", "127.0.0.1")
# "json": one JSON object per line, with the run, ticket, step and worker of the loop's lines.
AGENT_LOG_FORMAT = env_choice("AGENT_LOG_FORMAT", ("plain", "json"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run_context": {"()": "kit.logs.RunContextFilter"}},
    "formatters": {"json": {"()": "kit.logs.JsonFormatter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["run_context"],
            **({"formatter": "json"} if AGENT_LOG_FORMAT == "json" else {}),
        }
    },
    "loggers": {
        "agentrun": {"handlers": ["console"], "level": env_str("AGENT_LOG_LEVEL", "WARNING")},
        "supportagent": {"handlers": ["console"], "level": env_str("AGENT_LOG_LEVEL", "WARNING")},
    },
}
if AGENT_LOG_PROMPTS == "redacted":  # the redacted prompts are logged at INFO, whatever AGENT_LOG_LEVEL says
    LOGGING["loggers"]["agentrun.providers"] = {"level": "INFO"}

# Staff surfaces: the admin is the login page; ninja serves its API docs from static files (no CDN).
INSTALLED_APPS += ["ninja"]
LOGIN_URL = "admin:login"

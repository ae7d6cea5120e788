"""The ticket domain: accounts, customer sessions, tickets, jobs, services and documents.

`models` and `selectors` are what the tools read; `services` writes (intake, evidence,
publishing documents), `docimport` brings a knowledge base in (files through `docfiles`, a
Zendesk Guide through `zendeskguide`), `demo` seeds the demo data.
It imports only the kit; it tells the packages above it what happened through `signals`.
"""

"""What comes from and goes to the outside: help-desk intake, packet notifications.

`api` takes tickets from a help desk (the generic intake and Zendesk's signed webhook),
`zendesk` checks Zendesk's signature, `webhooks` records and delivers signed packet and
approval events (and is the outbox every message to the help desk goes through),
`zendesknotes` writes a private note on the Zendesk ticket a packet is about. The
engine announces what happened through its signals (`engine.signals`); this package
listens (see `apps`). It may import the engine and everything below it, never the
staff surfaces, the evaluation or the scenarios.
"""

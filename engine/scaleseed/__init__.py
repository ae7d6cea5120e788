"""A year of made-up work, written fast, for measuring the staff pages (`manage.py seed_scale`).

Never loaded by the demo, the tests' fixtures or production code. `schedule` decides when each ticket's
runs happen (1,000 a day by default, busier on weekdays and in working hours); `world` makes the small
tables once through the ORM (accounts, customers, staff, the knowledge base, services) and the tool
results evidence quotes, through the tools themselves; `story` writes each ticket and everything its
runs left (requests, attempts, evidence, approvals, packets, reviews, re-checks) as plain rows;
`copying` sends those rows to PostgreSQL with COPY, in the columns the models declare.
"""

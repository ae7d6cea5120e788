"""What staff and supervisors see and do: the admin, the pages, the JSON API, the dashboard.

`access` is the one place a permission is checked (`access_*` reads, `do_*` acts);
the admin (`admin/`), the API (`api`) and the dashboard go through it. `reviews` and
`recheck` hold the review of a packet and the re-reading of its evidence, `queue` the
review queue (its order and its search), `gaps` the knowledge gaps (what no article
answered, by topic). It is the top of the house below the project package: it may import
every package but the scenarios, and nothing imports it but `supportagent`.
"""

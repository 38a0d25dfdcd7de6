"""A node's metrics and health over HTTP: `/metrics` in Prometheus' text format, `/health` and
`/ready`, on `http.listeners` (docs/METRICS.md lists every series).

It lives in the broker layer because it reads every service of a node (partitions, the
coordinators, the controller and its quorum, the listeners) and only the broker layer may
import them all; the composition root (`broker.node`) starts it like the node's other
listeners. Nothing below imports it: the layers it reads keep plain integer counters of their
own (`replication.stats`, the dispatcher's `RequestMetrics`), which this package turns into
Prometheus families when it is scraped, so the produce and fetch paths never touch a
prometheus-client object.
"""

"""Moldau's schema registry: Confluent's Schema Registry API over a compacted `_schemas` topic.

A client of the log (as Confluent's registry and Karapace are): its state is the `_schemas`
topic, read back into memory at start; it reaches the cluster through `moldau.client` only. See
README.md beside this file.
"""

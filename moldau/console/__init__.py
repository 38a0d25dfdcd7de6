"""The web console (`moldau console`): a Starlette application over `moldau.client` that shows
a Kafka-compatible cluster's brokers, topics, messages and consumer groups. See README.md."""

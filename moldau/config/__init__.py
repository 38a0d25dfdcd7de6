"""Configuration with Kafka's property names; see `definitions` for the keys and `values` for layering."""

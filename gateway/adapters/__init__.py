"""IO adapters: the Redis store, the embedded Redis server and the upstream model client."""

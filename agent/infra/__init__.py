"""Infrastructure: progress events, the shared circuit breaker, Redis transactions, error classes."""

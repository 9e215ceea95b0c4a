"""The HTTP edge: OpenAI-compatible routes, request validation and error responses."""

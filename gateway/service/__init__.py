"""The service layer: what a chat request does, between the HTTP edge and the adapters."""

"""Tollway's HTTP service: the Sanic app, its routes, services and the model-call relay."""

__version__ = "0.1.0"

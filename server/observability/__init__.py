"""Operators' routes: `/metrics` (Prometheus), `/healthz` and `/readyz` (load balancers, probes)."""

"""Prometheus metrics of the service, on a registry of its own (two services in one process,
as in tests, do not collide). Percentiles come from the histograms' buckets (PromQL
`histogram_quantile`); `/v1/health` also reports p50 / p99 over recent requests."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        p = "cuda_agent_serve_"
        self.accepted = Counter(p + "accepted", "requests accepted for evaluation", registry=r)
        self.cache_hits = Counter(p + "cache_hits", "requests answered by an identical earlier one", registry=r)
        self.rejected = Counter(p + "rejected", "requests refused, by why", ["why"], registry=r)
        self.evaluations = Counter(p + "evaluations", "evaluations finished, by reward (or 'failed': no verdict)",
                                   ["reward"], registry=r)
        self.verdicts = Counter(p + "verdicts", "evaluations finished, by the stage that decided them",
                                ["stage", "correct"], registry=r)
        self.eval_seconds = Histogram(p + "evaluation_seconds", "a judge's time on one evaluation", ["slot"],
                                      buckets=_BUCKETS, registry=r)
        self.latency = Histogram(p + "latency_seconds", "accept to verdict, queueing included", buckets=_BUCKETS,
                                 registry=r)
        self.queue_depth = Gauge(p + "queue_depth", "accepted requests no judge has taken yet", registry=r)
        self.running = Gauge(p + "running", "evaluations on a judge now", registry=r)
        self.utilisation = Gauge(p + "device_utilisation", "busy seconds / uptime, per slot", ["slot"], registry=r)
        self.http = Counter(p + "http_requests", "HTTP requests by route and status", ["route", "code"], registry=r)

    def observe(self, result: Any, error: str | None, busy_s: float, latency_s: float | None, slot: str) -> None:
        if result is None:
            self.evaluations.labels("failed").inc()
        else:
            self.evaluations.labels(str(result.reward)).inc()
            self.verdicts.labels(result.stage, str(result.correct).lower()).inc()
        self.eval_seconds.labels(slot).observe(busy_s)
        if latency_s is not None:
            self.latency.observe(latency_s)


__all__ = ["Metrics"]

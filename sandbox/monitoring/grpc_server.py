"""The wire of the sandbox's Cloud Monitoring: ``google.monitoring.v3.MetricService/ListTimeSeries``
over plain-text gRPC, as the official ``google-cloud-monitoring`` client calls it (that library has
gRPC transports only). Requests and answers are the library's own protobuf messages; errors are gRPC
statuses with Google's messages (the client raises its usual ``InvalidArgument``, ``NotFound``, ...).
Injected faults (target ``monitoring``) answer UNAVAILABLE / the status asked for, or hang."""

from __future__ import annotations

import logging
import time
from concurrent import futures
from typing import Any

from sandbox.errors import STATUS, ApiError
from sandbox.monitoring.model import DISTRIBUTION, INT64, Dist
from sandbox.monitoring.query import Aggregation, ListRequest, OutSeries, list_time_series

log = logging.getLogger(__name__)

SERVICE = "google.monitoring.v3.MetricService"


def _status_code(status: str) -> Any:
    import grpc

    code = STATUS[status][1]
    return next(c for c in grpc.StatusCode if c.value[0] == code)


class MonitoringServer:
    """A gRPC server for one sandbox's ``MonitoringBackend`` on ``host:port`` (0: a free port)."""

    def __init__(self, backend: Any, faults: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import grpc
        from google.cloud import monitoring_v3

        self.backend = backend
        self.faults = faults
        req_pb = monitoring_v3.ListTimeSeriesRequest.pb()
        resp_pb = monitoring_v3.ListTimeSeriesResponse.pb()
        self._resp = resp_pb
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "ListTimeSeries": grpc.unary_unary_rpc_method_handler(
                    self._list,
                    request_deserializer=req_pb.FromString,
                    response_serializer=resp_pb.SerializeToString,
                )
            },
        )
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="sandbox-monitoring")
        )
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port(f"{host}:{port}")
        self.url = f"http://{host}:{self.port}"
        self.calls = 0

    def start(self) -> MonitoringServer:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop(grace=0.5).wait(2)

    # ------------------------------------------------------------------------------ the call
    def _list(self, request: Any, context: Any) -> Any:
        self.calls += 1
        fault = self.faults.take(("monitoring", "timeSeries.list"))
        if fault is not None:
            if fault.kind == "hang":
                deadline = time.monotonic() + (fault.seconds if fault.seconds is not None else 3600.0)
                while context.is_active() and time.monotonic() < deadline:
                    time.sleep(0.02)
                if not context.is_active():
                    return self._resp()
            else:
                from sandbox.errors import status_for_http

                status = status_for_http(fault.status) if fault.kind == "status" else "UNAVAILABLE"
                context.abort(
                    _status_code(status), f"Injected fault: HTTP {fault.status} from the gemma-sre sandbox."
                )
        try:
            req = _request(request)
            series, token = list_time_series(self.backend, req)
        except ApiError as e:
            context.abort(_status_code(e.status), e.message)
        except Exception as e:  # never crash on input: a Google-shaped INTERNAL instead
            log.exception("sandbox monitoring: unhandled error")
            context.abort(_status_code("INTERNAL"), f"Internal error in the sandbox: {e.__class__.__name__}")
        return self._answer(series, token)

    def _answer(self, series: list[OutSeries], token: str) -> Any:
        from google.api import distribution_pb2, metric_pb2, monitored_resource_pb2
        from google.cloud import monitoring_v3

        ts_pb = monitoring_v3.TimeSeries.pb()
        point_pb = monitoring_v3.Point.pb()
        kinds = metric_pb2.MetricDescriptor.MetricKind
        types = metric_pb2.MetricDescriptor.ValueType
        out = []
        for s in series:
            ts = ts_pb(
                metric=metric_pb2.Metric(type=s.metric_type, labels=s.metric_labels),
                resource=monitored_resource_pb2.MonitoredResource(
                    type=s.resource_type, labels=s.resource_labels
                ),
                metric_kind=kinds.Value(s.kind),
                value_type=types.Value(s.value_type),
                unit=s.unit,
            )
            for start, end, v in s.points:
                p = point_pb()
                p.interval.end_time.FromNanoseconds(int(end * 1e9))
                if s.kind != "GAUGE":
                    p.interval.start_time.FromNanoseconds(int(start * 1e9))
                if s.value_type == DISTRIBUTION and isinstance(v, Dist):
                    p.value.distribution_value.CopyFrom(
                        distribution_pb2.Distribution(
                            count=int(round(v.count)),
                            mean=v.mean,
                            bucket_options=distribution_pb2.Distribution.BucketOptions(
                                explicit_buckets=distribution_pb2.Distribution.BucketOptions.Explicit(
                                    bounds=v.bounds
                                )
                            ),
                            bucket_counts=[int(round(c)) for c in v.counts],
                        )
                    )
                elif s.value_type == INT64:
                    p.value.int64_value = int(round(float(v.mean if isinstance(v, Dist) else v)))
                else:
                    p.value.double_value = float(v.mean if isinstance(v, Dist) else v)
                ts.points.append(p)
            out.append(ts)
        return self._resp(time_series=out, next_page_token=token)


def _request(pb: Any) -> ListRequest:
    from google.cloud import monitoring_v3

    agg = pb.aggregation
    aligner = monitoring_v3.Aggregation.Aligner(agg.per_series_aligner).name
    reducer = monitoring_v3.Aggregation.Reducer(agg.cross_series_reducer).name
    has_interval = pb.HasField("interval")
    start = (
        pb.interval.start_time.ToNanoseconds() / 1e9
        if has_interval and pb.interval.HasField("start_time")
        else None
    )
    end = (
        pb.interval.end_time.ToNanoseconds() / 1e9
        if has_interval and pb.interval.HasField("end_time")
        else None
    )
    view = monitoring_v3.ListTimeSeriesRequest.TimeSeriesView(pb.view).name
    return ListRequest(
        name=pb.name,
        filter=pb.filter,
        start=start,
        end=end,
        aggregation=Aggregation(
            period_s=agg.alignment_period.ToNanoseconds() / 1e9 if agg.HasField("alignment_period") else 0.0,
            aligner=aligner,
            reducer=reducer,
            group_by=list(agg.group_by_fields),
        ),
        page_size=pb.page_size,
        page_token=pb.page_token,
        headers_only=view == "HEADERS",
    )

"""Cloud Monitoring v3 in the sandbox: sampled instance history (``model``), ``timeSeries.list``
(``query``) and its gRPC wire (``grpc_server``), from the simulator's own state (``physics``)."""

"""The HTTP server: a thin layer over the engine.

Inside, each imports only those below it: server; gunicorn_conf; app;
mutate, extender and selftest; webhook_metrics; front, request_counter,
process_metrics and tls; admission, framing and metrics.
May import of the engine: the serving wiring (serving.py), config and
config_file, errors, and the scores document (measuring/scoreview.py);
everything else through what serving.py hands it. Never the kubernetes client.
"""

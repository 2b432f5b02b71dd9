"""The webhook's TLS: CA and serving certificate, their files and Secret,
the caBundle patch, rotation.

May import: kube and the foundation.
"""

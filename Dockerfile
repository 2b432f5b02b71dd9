# Build stage: a venv from the hash-locked dependencies (requirements.lock,
# refreshed by .ci/lock) and the project; nothing from here but the venv
# reaches the image.
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock ./
RUN python -m venv /opt/nettraffic \
 && /opt/nettraffic/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml setup.cfg README.md ./
COPY kubectl_nettraffic ./kubectl_nettraffic
COPY webhook ./webhook
RUN /opt/nettraffic/bin/pip install --no-deps . \
 && /opt/nettraffic/bin/pip uninstall --yes pip setuptools

# Final stage: slim Python, the venv, a non-root user. No compilers, and no
# pip or setuptools anywhere: the base interpreter's own copies and the
# wheels its ensurepip would install are removed too.
FROM python:3.11.11-slim-bookworm
LABEL org.opencontainers.image.title="nettraffic" \
      org.opencontainers.image.description="Network-traffic-aware pod placement: webhook, extender, kubectl plugin and cert tooling" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN python -m pip uninstall --yes pip setuptools wheel 2>/dev/null; \
    rm -rf /usr/local/lib/python3.11/ensurepip /usr/lib/python3.11/ensurepip /usr/share/python-wheels \
 && if python -c 'import pip' 2>/dev/null || python -c 'import setuptools' 2>/dev/null; then exit 1; fi
COPY --from=build /opt/nettraffic /opt/nettraffic
ENV PATH=/opt/nettraffic/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532 matches the chart's runAsUser; the root filesystem is read-only there.
USER 65532:65532
EXPOSE 8443
# The hook Jobs run `kubectl-nettraffic certs ...` from this same image.
ENTRYPOINT ["nettraffic-webhook"]
CMD ["--config", "/etc/nettraffic/config/config.yaml"]

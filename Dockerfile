# Stage 1: install the project and build the tool registry; any tool error fails the image build.
FROM python:3.11-slim AS build
WORKDIR /app
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY transports ./transports
COPY rfc6455 ./rfc6455
COPY tools ./tools
COPY registry_build ./registry_build
RUN pip install --no-cache-dir .
RUN python -m registry_build --tools tools --out build/tool_registry.json

# Stage 2: slim runtime as a non-root user. Same /app path as stage 1, because the artifact
# records each handler's absolute path and the gateway checks the tool files are unchanged.
FROM python:3.11-slim
RUN useradd --create-home --uid 10001 gateway
WORKDIR /app
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app/tools ./tools
COPY --from=build /app/build/tool_registry.json ./build/tool_registry.json
ENV PATH=/opt/venv/bin:$PATH \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8080 \
    GATEWAY_REGISTRY=/app/build/tool_registry.json \
    GATEWAY_DATA_DIR=/home/gateway/data \
    GATEWAY_LOG_FORMAT=json
USER gateway
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"
CMD ["gateway", "serve"]

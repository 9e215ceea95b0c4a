# PCP Gateway: `pcp-gateway serve` on 0.0.0.0:4000 with the embedded Redis in /app/data.
# Give it a key: `docker run -e PCP_MASTER_KEY=sk-... -e OPENAI_API_KEY=...` (the shipped config reads
# general_settings.master_key from PCP_MASTER_KEY); without keys it refuses to serve on 0.0.0.0.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The CPU build of torch first, so transformers never pulls the CUDA wheels (torch only exports the
# embedding model to ONNX at build time; the gateway runs it with onnxruntime).
RUN pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip install . && python -m gateway.adapters.onnx_export

COPY config.yaml ./config.yaml
VOLUME ["/app/data"]
EXPOSE 4000

CMD ["pcp-gateway", "serve", "--config", "/app/config.yaml", "--host", "0.0.0.0", "--port", "4000"]

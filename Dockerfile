# The guard service (`sp-dspy serve --guard`) in a container. Build and run:
#   docker build -t sp-dspy-guard .
#   docker run -p 8080:8080 -e GUARD_TOKEN=... -e OPENAI_API_KEY=... sp-dspy-guard
# Arguments after the image name replace the default `--guard official --lm openai/gpt-5-mini`
# (CMD below); a compiled guard: put its directory under artifacts/ before building, then
#   docker run ... sp-dspy-guard --guard artifacts/NAME --lm openai/gpt-5-mini --max-usd 20
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
WORKDIR /app
COPY pyproject.toml README.md ./
COPY sp_dspy ./sp_dspy
COPY programs ./programs
COPY optimizers ./optimizers
RUN pip install --no-cache-dir . && useradd --create-home guard
COPY artifacts ./artifacts
USER guard

EXPOSE 8080
# SIGTERM (docker stop, a scheduler's stop) finishes the checks in flight; give it the request timeout.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"
ENTRYPOINT ["sp-dspy", "serve", "--host", "0.0.0.0", "--port", "8080", "--auth-token-env", "GUARD_TOKEN"]
CMD ["--guard", "official", "--lm", "openai/gpt-5-mini"]

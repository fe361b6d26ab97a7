# Tollway: `docker build -t tollway .` then `docker run -p 3000:3000 -v tollway-data:/data tollway`
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 tollway \
    && useradd --system --uid 10001 --gid tollway --home-dir /data --no-create-home tollway \
    && mkdir -p /data \
    && chown tollway:tollway /data && chmod 700 /data

WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir . \
    && rm -rf /app

WORKDIR /data
USER tollway

ENV HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data

VOLUME /data
EXPOSE 3000

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:3000/api/status', timeout=4).status == 200 else 1)"]

ENTRYPOINT ["tollway"]
CMD ["serve"]

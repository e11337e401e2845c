# syntax=docker/dockerfile:1
#
# hookonce: a static binary on distroless (no shell, no package manager,
# CA certificates included, uid 65532). Build:
#   docker build --build-arg VERSION=$(git describe --always) -t hookonce .
# The SQLite store lives in the volume /var/lib/hookonce; use
# HOOKONCE_STORE=postgres://… or redis://… to share one store between replicas.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# modernc.org/sqlite is pure Go, so CGO stays off and the binary is static.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/hookonce . \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hookonce /hookonce
# The state directory must belong to the runtime user before the volume is
# mounted, so a fresh named volume is created writable for it.
COPY --from=build --chown=65532:65532 /out/state /var/lib/hookonce
WORKDIR /var/lib/hookonce
VOLUME ["/var/lib/hookonce"]
ENV HOOKONCE_LISTEN=":8080" \
    HOOKONCE_STORE="sqlite:/var/lib/hookonce/hookonce.db"
USER 65532:65532
# 8080: senders (and the rest of the site's traffic); 9090: admin API,
# /metrics, /healthz, /readyz. The admin listener stays on 127.0.0.1 unless
# HOOKONCE_ADMIN_LISTEN=:9090 and HOOKONCE_ADMIN_TOKEN are set.
EXPOSE 8080 9090
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/hookonce", "health", "--url", "http://127.0.0.1:9090/healthz"]
# SIGTERM drains deliveries in flight (serve --drain-timeout, 30s by
# default); give `docker stop` more: docker stop -t 40, or stop_grace_period.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/hookonce"]
CMD ["serve"]

# Stage 1: build the static binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X svc/worker.Version=${VERSION}" -o /out/svc . \
 && mkdir -p /out/var/lib/svc /out/var/cache/svc-ui

# Stage 2: run it from distroless (no shell, non-root). Mount the config at
# /etc/svc/svc.toml (or set SVC_CONFIG); a UI reachable from outside
# (ui.host = "0.0.0.0") needs ui.auth_token (see testdata/docker/svc.toml
# and docs/operations.md, "Docker"). The folders below, the user and the
# HEALTHCHECK are modelled without Docker by container_test.go.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/svc /usr/local/bin/svc
# storage.dir of testdata/docker/svc.toml: a volume mounted here starts
# owned by the non-root user.
COPY --from=build --chown=65532:65532 /out/var/lib/svc /var/lib/svc
# The per-host UI cache (ui.release.cache_dir's default): every start
# stages the embedded UI release here.
COPY --from=build --chown=65532:65532 /out/var/cache/svc-ui /var/cache/svc-ui
# svc run and svc health (the HEALTHCHECK) both read the config from here.
ENV SVC_CONFIG=/etc/svc/svc.toml
# UI (probes, API), HTTP ingress, metrics.
EXPOSE 8080 8090 9090
USER 65532:65532
# GET /readyz on the config's UI address: healthy once every source runs
# and the executor can run tasks (start-period covers a Kafka group join).
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 CMD ["/usr/local/bin/svc", "health", "-timeout", "5s"]
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["run"]

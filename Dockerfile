# Stage 1: build the static binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X svc/worker.Version=${VERSION}" -o /out/svc . \
 && mkdir -p /out/var/lib/svc

# Stage 2: run it from distroless (no shell, non-root). Mount the config at
# /etc/svc/svc.toml; a UI reachable from outside (ui.host = "0.0.0.0") needs
# ui.auth_token (see testdata/docker/svc.toml and docs/operations.md).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/svc /usr/local/bin/svc
# storage.dir for testdata/docker/svc.toml: a volume mounted here starts
# owned by the non-root user.
COPY --from=build --chown=65532:65532 /out/var/lib/svc /var/lib/svc
EXPOSE 8080 8090 9090
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["run", "-config", "/etc/svc/svc.toml"]

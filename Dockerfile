# syntax=docker/dockerfile:1
#
# The seckill image: a static binary on distroless, running as nonroot.
#   docker build -t seckill .
#   docker run --rm -p 8080:8080 seckill          # embedded quick start
# The full stack (MariaDB, Redis, three replicas, HAProxy, Prometheus,
# Grafana, k6) is docker-compose.yml; see deploy/README.md.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
# The lock and its ZooKeeper client are modules of their own (replace ./lock).
COPY lock/go.mod lock/go.sum ./lock/
COPY lock/zookeeper/go.mod lock/zookeeper/go.sum ./lock/zookeeper/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/seckill ./cmd/seckill

# No shell, no package manager, no root: the container healthcheck is the
# binary itself (`seckill healthcheck`, which asks its own /readyz).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/seckill /seckill
# Inside a container the listener must not be loopback-only.
ENV SECKILL_HTTP_ADDR=0.0.0.0:8080
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/seckill"]
CMD ["serve"]

# syntax=docker/dockerfile:1
# Build a static binary, then ship it alone in a distroless image as a non-root user.

# The builder's Go must satisfy go.mod's go line: the golang images set
# GOTOOLCHAIN=local, so an older one fails rather than download a newer Go.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# VERSION is stamped into the binary (`vkcounter version`, the start-up log
# line, vkcounter_build_info); the build context has no .git to read it from:
#   fly deploy --build-arg VERSION=$(git describe --tags --always --dirty)
ARG VERSION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
    -ldflags="-s -w -X github.com/vkcounter/vkcounter/internal/version.Stamp=${VERSION}" \
    -o /out/vkcounter ./cmd/vkcounter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vkcounter /usr/local/bin/vkcounter
USER nonroot:nonroot
# The image is a deployment, so a missing secret must not pass for a
# working service: it refuses to start without REDIS_URL or REDIS_CLUSTER
# (no embedded Redis counting on its own) and without a VK token (no
# dry-run), and /readyz fails until VK accepts every token. `go run` keeps
# both defaults off.
ENV REQUIRE_REDIS=true REQUIRE_VK_TOKEN=true
# 8080: webhook, /counters/, /healthz (public). 9090: /metrics, /stats,
# /readyz, and 11215: counter protocol. Neither of the last two has
# authentication: the image listens on all of the container's addresses,
# which are private; publish them on loopback or a private network only
# (docker run -p 127.0.0.1:9090:9090; compose.yaml does), never to the world.
ENV ADMIN_ADDR=:9090 COUNTER_ADDR=:11215
EXPOSE 8080 9090 11215
ENTRYPOINT ["/usr/local/bin/vkcounter"]
CMD ["serve"]

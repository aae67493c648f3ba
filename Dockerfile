# Build a static binary, then ship it alone in a distroless image as a non-root user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/vkcounter ./cmd/vkcounter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vkcounter /usr/local/bin/vkcounter
USER nonroot:nonroot
# 8080: webhook, /counters/, /healthz (public). 9090: /metrics, /stats, /readyz, and 11215: counter
# protocol (both without authentication: keep them private).
EXPOSE 8080 9090 11215
ENTRYPOINT ["/usr/local/bin/vkcounter"]
CMD ["serve"]

# The informer-host image: a static binary (wazero and client-go need no
# cgo) on a distroless base, running as non-root (uid 65532, as
# deploy/deployment.yaml expects).
#
#   docker build -t informer-host .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /informer-host ./cmd/informer-host

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /informer-host /informer-host
ENTRYPOINT ["/informer-host"]

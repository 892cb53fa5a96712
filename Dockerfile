# syntax=docker/dockerfile:1.7
# chatguard: one small image with the static binaries (/batch, /worker,
# /consumer, /console, /trigger) on distroless static, running as the nonroot user 65532 with no
# shell. Build (deploy/README.md, "Image"):
#
#   docker build --build-arg VERSION=v1.4.0 --build-arg REVISION="$(git rev-parse HEAD)" -t REGISTRY/chatguard:v1.4.0 .
#
# Without a container daemon, deploy/k8s/cmd/chatguard-image builds the same
# image (same flags, same layout; the deploy/k8s tests check both agree).
# Pin both base images by digest in your registry mirror (e.g.
# --build-arg BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:...).

# Release builds use a Go with every published standard-library fix: `make
# vulncheck` fails when a reachable standard-library vulnerability is fixed
# only in a newer Go than this one.
ARG GO_IMAGE=golang:1.26.10-bookworm
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
# The product builds from its own go.mod alone: no workspace, no cgo, no VCS
# probing (the revision is passed in).
ENV GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/chatguard/chatguard/internal/buildinfo.version=${VERSION} -X github.com/chatguard/chatguard/internal/buildinfo.revision=${REVISION}" \
      -o /out/ ./cmd/batch ./cmd/worker ./cmd/consumer ./cmd/console ./cmd/trigger

FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="chatguard" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/chatguard/chatguard"
# Owned by root and read-only: the process cannot replace its own binary.
COPY --from=build --chown=0:0 --chmod=0555 /out/batch /out/worker /out/consumer /out/console /out/trigger /
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/worker"]

# syntax=docker/dockerfile:1
#
# The openplaybook image: the static binary on distroless, as a non-root
# user. Build from the repository root:
#
#   docker build -t openplaybook \
#     --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg DATE=$(git log -1 --format=%cI) .
#   docker run --rm -v "$PWD:/work" openplaybook validate playbooks/
#
# The tests in internal/release check this file's shape (no Docker engine
# is needed for them); see docs/ci.md.

# The Go of go.mod's go directive.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
# modernc.org/sqlite is pure Go: CGO_ENABLED=0 gives a static binary that
# needs no libc, as the static distroless image has none.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w \
        -X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Version=${VERSION} \
        -X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Commit=${COMMIT} \
        -X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Date=${DATE}" \
      -o /out/openplaybook ./cmd/openplaybook

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/openplaybook /usr/local/bin/openplaybook
USER nonroot
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/openplaybook"]
CMD ["--help"]

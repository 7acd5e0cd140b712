# The Fargate executor (cmd/batchwork-executor), built by `cdk deploy` when
# the stack is deployed with -c executor=fargate (or both). Task functions
# are compiled in: register yours in cmd/batchwork-executor/main.go.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=arm64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags='-s -w' -o /out/batchwork-executor ./cmd/batchwork-executor

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/batchwork-executor /batchwork-executor
USER nonroot:nonroot
ENTRYPOINT ["/batchwork-executor"]

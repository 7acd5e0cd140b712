# syntax=docker/dockerfile:1
# The Fargate executor (cmd/batchwork-executor), built by `cdk deploy` when
# the stack is deployed with -c executor=fargate (or both). Task functions
# are compiled in: register yours in cmd/batchwork-executor/main.go.
#
# Exec stages (a spec's `exec: [program, args...]`) run programs from the
# directory BATCHWORK_EXEC_DIR names, and only from there. The default
# image (RUNTIME=go) has none: it publishes no programs and hands exec
# stages' tasks back unclaimed, and submit refuses a program no executor
# has published. RUNTIME=python adds a Python runtime and the programs in
# /opt/batchwork/bin: here the word count of examples/wordcount. The
# executor publishes them when it starts; list them in the construct's
# ExecPrograms too (["wordcount.py"]) so specs naming them are accepted
# before the Fargate service has first scaled out.
#
#   docker build --build-arg RUNTIME=python .
#
# (With CDK: the DockerImageAsset's buildArgs, {"RUNTIME": "python"}.) To
# add your own script, copy it next to wordcount.py below: executable,
# with a "#!/usr/bin/env python3" first line, named as specs name it
# (exec: [my-script.py, ...]). Install scripts only: a shell or an
# interpreter in that directory would run any code a spec passes it.
ARG RUNTIME=go

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=arm64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags='-s -w' -o /out/batchwork-executor ./cmd/batchwork-executor

# Go tasks only: no shell, no interpreter, no programs.
FROM gcr.io/distroless/static-debian12:nonroot AS runtime-go
COPY --from=build /out/batchwork-executor /batchwork-executor
USER nonroot:nonroot
ENTRYPOINT ["/batchwork-executor"]

# Go tasks, and exec stages running the Python scripts in
# /opt/batchwork/bin (standard library only; add `RUN pip install ...`
# before USER for more). A Debian base rather than distroless, which has
# no /usr/bin/env for the scripts' first line.
FROM python:3.12-slim-bookworm AS runtime-python
COPY --from=build /out/batchwork-executor /batchwork-executor
COPY --chmod=0755 examples/wordcount/wordcount.py /opt/batchwork/bin/wordcount.py
ENV BATCHWORK_EXEC_DIR=/opt/batchwork/bin
# distroless's nonroot user id; the scripts are root's, so not writable.
USER 65532:65532
ENTRYPOINT ["/batchwork-executor"]

FROM runtime-${RUNTIME}

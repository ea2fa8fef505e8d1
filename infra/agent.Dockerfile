# gleaner-agent for container platforms (SaladCloud): the agent is the entry point and trains
# with gleaner-train beside it (docs/agent.md, "Container image").
#
#   docker build -f infra/agent.Dockerfile -t gleaner-agent .
#   docker run --gpus all -e GLEANER_COORDINATOR=https://coord.example \
#              -e GLEANER_ENROLL_TOKEN=... gleaner-agent
#
# Settings come from the environment: GLEANER_COORDINATOR, GLEANER_ENROLL_TOKEN, GLEANER_CA_FILE,
# GLEANER_MACHINE_ID (flags may also be appended to `docker run`). On SaladCloud the platform sets
# SALAD_MACHINE_ID, which the agent uses as its machine id, and which turns on the instance
# deletion cost: high while a job runs, 0 when idle, so scale-in removes idle instances first.
#
# GLEANER_WITH_TORCH=ON builds the libtorch trainer kinds against Debian's libtorch (CPU); a CUDA
# image builds against the libtorch that ships inside a CUDA PyTorch install instead.
ARG DEBIAN_IMAGE=debian:12

FROM ${DEBIAN_IMAGE} AS build
ARG GLEANER_WITH_TORCH=ON
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake ninja-build pkg-config \
      ca-certificates libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libcpp-httplib-dev \
      libsqlitecpp-dev libsqlite3-dev \
      $(if [ "$GLEANER_WITH_TORCH" = ON ]; then echo libtorch-dev; fi) \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY shared shared
COPY coordinator coordinator
COPY agent agent
COPY wasm wasm
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLEANER_TESTS=OFF \
      -DGLEANER_WITH_TORCH=${GLEANER_WITH_TORCH} \
 && cmake --build /build --target gleaner-agent gleaner-train \
 && install -D -m 0755 -t /out /build/bin/gleaner-agent /build/bin/gleaner-train

FROM ${DEBIAN_IMAGE}
ARG GLEANER_WITH_TORCH=ON
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libcurl4 libssl3 \
      $(if [ "$GLEANER_WITH_TORCH" = ON ]; then echo libtorch1.13; fi) \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --user-group --no-create-home --home-dir /var/lib/gleaner-agent \
      --shell /usr/sbin/nologin gleaner \
 && install -d -o gleaner -g gleaner -m 0700 /var/lib/gleaner-agent
COPY --from=build /out/ /usr/local/bin/
USER gleaner
ENV GLEANER_STATE_DIR=/var/lib/gleaner-agent
# The platform's stop signal: the agent checkpoints, uploads, releases its job and exits within
# --shutdown-deadline (20 s by default).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gleaner-agent"]

# gleaner-agent with a CUDA gleaner-train, for NVIDIA GPUs on container platforms (SaladCloud):
# the same entry point, settings, user and SIGTERM behaviour as infra/agent.Dockerfile
# (docs/agent.md, "Container image"); the trainer is built against the libtorch inside an official
# PyTorch CUDA image and runs on that image's runtime flavour.
#
#   docker build -f infra/agent-cuda.Dockerfile -t gleaner-agent-cuda .
#   docker run --gpus all -e GLEANER_COORDINATOR=https://coord.example \
#              -e GLEANER_ENROLL_TOKEN=... gleaner-agent-cuda
#
# Stages: `agent` builds gleaner-agent on Debian 12 exactly as agent.Dockerfile does (it needs
# libcurl and OpenSSL only, and needs at most glibc 2.34 and libstdc++ of GCC 12, which the Ubuntu
# 22.04 of the PyTorch images has: the last stage runs it once to prove it loads); `trainer` builds
# gleaner-train in the PyTorch devel image, trainer-only (-DGLEANER_TRAINER_ONLY=ON), with CUDA;
# the last stage is the PyTorch runtime image with both binaries. PYTORCH_IMAGE picks the PyTorch
# and CUDA release (its -devel and -runtime tags must both exist). gleaner-train compiles no CUDA
# kernels of its own; TORCH_CUDA_ARCH_LIST only spares libtorch's CMake package from probing for
# a GPU, which a docker build does not have.
ARG DEBIAN_IMAGE=debian:12
ARG PYTORCH_IMAGE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9

FROM ${DEBIAN_IMAGE} AS agent
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake ninja-build pkg-config \
      ca-certificates libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libcpp-httplib-dev \
      libsqlitecpp-dev libsqlite3-dev libjpeg62-turbo-dev libpng-dev libwebp-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY shared shared
COPY coordinator coordinator
COPY agent agent
COPY wasm wasm
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLEANER_TESTS=OFF \
      -DGLEANER_WITH_TORCH=OFF \
 && cmake --build /build --target gleaner-agent \
 && install -D -m 0755 -t /out /build/bin/gleaner-agent

FROM ${PYTORCH_IMAGE}-devel AS trainer
# GCC 12, the compiler the project is checked with (warnings are errors), and the image codecs
# for prepare-images.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc-12 g++-12 make cmake ninja-build pkg-config \
      nlohmann-json3-dev libjpeg-turbo8-dev libpng-dev libwebp-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
ENV TORCH_CUDA_ARCH_LIST="7.5;8.0;8.6;8.9;9.0"
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY shared shared
COPY agent agent
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLEANER_TESTS=OFF \
      -DCMAKE_C_COMPILER=gcc-12 -DCMAKE_CXX_COMPILER=g++-12 \
      -DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed \
      -DGLEANER_TRAINER_ONLY=ON -DGLEANER_WITH_CUDA=ON \
      -DTorch_DIR="$(python -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch" \
 && cmake --build /build --target gleaner-train \
 && install -D -m 0755 -t /out /build/bin/gleaner-train

FROM ${PYTORCH_IMAGE}-runtime
# The trainer finds libtorch through the RUNPATH the build gave it (the same site-packages path in
# the -devel and -runtime images); --as-needed above keeps the CUDA toolkit's own libraries, which
# only the -devel image has, out of its direct dependencies (libtorch brings the runtime's).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libcurl4 libssl3 libgomp1 \
      libjpeg-turbo8 libpng16-16 libwebp7 libwebpdemux2 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --user-group --no-create-home --home-dir /var/lib/gleaner-agent \
      --shell /usr/sbin/nologin gleaner \
 && install -d -o gleaner -g gleaner -m 0700 /var/lib/gleaner-agent
COPY --from=agent /out/ /usr/local/bin/
COPY --from=trainer /out/ /usr/local/bin/
# Both load here (shared libraries found, glibc new enough), or the build stops.
RUN /usr/local/bin/gleaner-agent --help >/dev/null && /usr/local/bin/gleaner-train --version
USER gleaner
ENV GLEANER_STATE_DIR=/var/lib/gleaner-agent
# The NVIDIA container runtime mounts the driver, NVML (libnvidia-ml.so.1: the GPU name and VRAM
# the agent registers) and the device nodes.
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
# The platform's stop signal: the agent checkpoints, uploads, releases its job and exits within
# --shutdown-deadline (20 s by default).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gleaner-agent"]
